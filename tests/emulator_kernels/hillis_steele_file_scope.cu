// Inclusive Hillis-Steele scan of one block: a file-scope `extern __shared__` buffer used through
// a __device__ helper and a macro.
extern __shared__ __align__(16) scan_t temp[];

#define AT(buffer, i) temp[(buffer) * BLOCK_SIZE + (i)]

__device__ scan_t read_at(int buffer, int i) { return temp[buffer * BLOCK_SIZE + i]; }

__global__ void naive_scan(const scan_t* in, scan_t* out, int n) {
    const int t = threadIdx.x;
    int cur = 0;
    AT(0, t) = t < n ? in[t] : 0;
    __syncthreads();
    for (int offset = 1; offset < BLOCK_SIZE; offset *= 2) {
        scan_t v = read_at(cur, t);
        if (t >= offset) v += read_at(cur, t - offset);
        AT(1 - cur, t) = v;
        cur = 1 - cur;
        __syncthreads();
    }
    if (t < n) out[t] = AT(cur, t);
}
