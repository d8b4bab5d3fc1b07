// BROKEN (on purpose, an attack on hidden cases): a right inclusive scan that keeps the last n it
// was launched with in a __device__ global, across launches in the part's worker, and writes it
// into out[0] of the next case of another size, where the mismatch message shows it. Were a hidden case run
// before a visible one, its size would reach the student; the grader runs every visible case first.
// Every run of a case now also starts with fresh __device__ variables (docs/security.md): nothing
// carries from one case to the next, and every case passes.

__device__ int last_n = 0;

__global__ void naive_scan(const scan_t* in, scan_t* out, int n)
{
    extern __shared__ scan_t s[];  // only the first BLOCK_SIZE elements are used
    int i = threadIdx.x;

    s[i] = (i < n) ? in[i] : 0;
    __syncthreads();
    for (int offset = 1; offset < n; offset *= 2) {
        scan_t v = s[i];
        if (i >= offset)
            v = v + s[i - offset];
        __syncthreads();
        s[i] = v;
        __syncthreads();
    }
    if (i < n)
        out[i] = s[i];
    if (i == 0) {
        if (last_n != 0 && last_n != n)
            out[0] = (scan_t)last_n;  // the previous case's size, for the mismatch message to show
        last_n = n;
    }
}
