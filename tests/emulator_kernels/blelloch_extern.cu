/* Exclusive Blelloch scan of one block: a function-scope `extern __shared__` array,
   declared volatile, with the declaration split over
   several lines. */
__global__ void blelloch_scan(const scan_t* in, scan_t* out, int n) {
    extern volatile
        __shared__ scan_t
        temp[];
    const int t = threadIdx.x;
    temp[2 * t] = 2 * t < n ? in[2 * t] : 0;
    temp[2 * t + 1] = 2 * t + 1 < n ? in[2 * t + 1] : 0;
    int offset = 1;
    for (int d = BLOCK_SIZE; d > 0; d >>= 1) {
        __syncthreads();
        if (t < d) temp[offset * (2 * t + 2) - 1] += temp[offset * (2 * t + 1) - 1];
        offset *= 2;
    }
    if (t == 0) temp[2 * BLOCK_SIZE - 1] = 0;
    for (int d = 1; d < 2 * BLOCK_SIZE; d *= 2) {
        offset >>= 1;
        __syncthreads();
        if (t < d) {
            const int ai = offset * (2 * t + 1) - 1, bi = offset * (2 * t + 2) - 1;
            const scan_t x = temp[ai];
            temp[ai] = temp[bi];
            temp[bi] += x;
        }
    }
    __syncthreads();
    if (2 * t < n) out[2 * t] = temp[2 * t];
    if (2 * t + 1 < n) out[2 * t + 1] = temp[2 * t + 1];
}
