// Inclusive Hillis-Steele scan of one block (part 1's contract): a static __shared__ double buffer.
__global__ void naive_scan(const scan_t* in, scan_t* out, int n) {
    __shared__ scan_t buf[2][BLOCK_SIZE];
    const int t = threadIdx.x;
    int cur = 0;
    buf[cur][t] = t < n ? in[t] : 0;
    __syncthreads();
    for (int offset = 1; offset < BLOCK_SIZE; offset <<= 1) {
        scan_t v = buf[cur][t];
        if (t >= offset) v += buf[cur][t - offset];
        buf[1 - cur][t] = v;
        cur = 1 - cur;
        __syncthreads();
    }
    if (t < n) out[t] = buf[cur][t];
}
