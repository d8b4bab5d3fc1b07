// BROKEN (wrong scan): returns the inclusive scan (adds in[i] back) where the exclusive scan is asked; wrong at every n (out[0] = in[0], not 0).

__global__ void blelloch_scan(const scan_t* in, scan_t* out, int n)
{
    extern __shared__ scan_t s[];
    int tid = threadIdx.x;
    int ai = tid;
    int bi = tid + BLOCK_SIZE;

    s[ai] = (ai < n) ? in[ai] : 0;
    s[bi] = (bi < n) ? in[bi] : 0;

    int offset = 1;
    for (int d = BLOCK_SIZE; d > 0; d /= 2) {
        __syncthreads();
        if (tid < d) {
            int left = offset * (2 * tid + 1) - 1;
            int right = offset * (2 * tid + 2) - 1;
            s[right] = s[right] + s[left];
        }
        offset *= 2;
    }

    if (tid == 0)
        s[2 * BLOCK_SIZE - 1] = 0;

    for (int d = 1; d <= BLOCK_SIZE; d *= 2) {
        offset /= 2;
        __syncthreads();
        if (tid < d) {
            int left = offset * (2 * tid + 1) - 1;
            int right = offset * (2 * tid + 2) - 1;
            scan_t t = s[left];
            s[left] = s[right];
            s[right] = s[right] + t;
        }
    }
    __syncthreads();

    // "out[i] should include in[i]": true for Part 1, not here.
    if (ai < n)
        out[ai] = s[ai] + in[ai];
    if (bi < n)
        out[bi] = s[bi] + in[bi];
}
