// CORRECT (must pass every n): Hillis-Steele with ONE shared buffer: read into a register, barrier, write, barrier.

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
        __syncthreads();  // every thread has read this step's values before any is overwritten
        s[i] = v;
        __syncthreads();  // every thread has written before the next step reads
    }

    if (i < n)
        out[i] = s[i];
}
