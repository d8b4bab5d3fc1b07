// Inclusive Hillis-Steele scan of one block: a function-scope `extern __shared__` double buffer
// (the launch gives 2 * BLOCK_SIZE * sizeof(scan_t) dynamic bytes).
__global__ void naive_scan(const scan_t* in, scan_t* out, int n) {
    extern __shared__ scan_t temp[];
    const int t = threadIdx.x;
    int cur = 0;
    temp[t] = t < n ? in[t] : 0;
    __syncthreads();
    for (int offset = 1; offset < BLOCK_SIZE; offset *= 2) {
        scan_t v = temp[cur * BLOCK_SIZE + t];
        if (t >= offset) v += temp[cur * BLOCK_SIZE + t - offset];
        temp[(1 - cur) * BLOCK_SIZE + t] = v;
        cur = 1 - cur;
        __syncthreads();
    }
    if (t < n) out[t] = temp[cur * BLOCK_SIZE + t];
}
