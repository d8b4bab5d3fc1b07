// CORRECT (must pass every n, and keep Part 3's profile points): not the padded Blelloch scan but Hillis and Steele's (1986), in place: each thread owns elements tid and tid + BLOCK_SIZE, shifted one place right so that the inclusive sweep gives the exclusive scan, and every level reads both neighbours, waits at a barrier, then writes. O(n log n) work, O(log n) steps per thread and 2 log n barriers; neighbouring lanes touch neighbouring words, so there is no bank conflict.

__global__ void blelloch_scan_cf(const scan_t* in, scan_t* out, int n)
{
    extern __shared__ scan_t s[];
    int tid = threadIdx.x;
    int a = tid;
    int b = tid + BLOCK_SIZE;

    s[a] = (a > 0 && a - 1 < n) ? in[a - 1] : 0;  // s[i] = in[i - 1]: the inclusive scan of s is
    s[b] = (b - 1 < n) ? in[b - 1] : 0;           // the exclusive scan of in

    for (int offset = 1; offset < 2 * BLOCK_SIZE; offset *= 2) {
        __syncthreads();  // the previous level's writes are complete
        scan_t va = s[a];
        scan_t vb = s[b];
        if (a >= offset)
            va += s[a - offset];
        if (b >= offset)
            vb += s[b - offset];
        __syncthreads();  // every read of this level is done before anyone writes
        s[a] = va;
        s[b] = vb;
    }
    __syncthreads();

    if (a < n)
        out[a] = s[a];
    if (b < n)
        out[b] = s[b];
}
