// Attack: a serial scan whose steps are spread over the threads, so that no thread makes many
// memory operations: for i = 1 .. n - 1, a barrier, then thread i mod BLOCK_SIZE sets
// out[i] = out[i - 1] + in[i - 1], a chain through global memory. One conflict-free store to
// shared memory makes the profile see shared traffic (with no bank conflict, few wavefronts), and
// each thread's span is a handful of operations; but the block passes n - 1 barriers: the chain
// is O(n) long, where a tree scan synchronises O(log n) times.

__global__ void blelloch_scan_cf(const scan_t* in, scan_t* out, int n)
{
    extern __shared__ scan_t s[];
    int tid = threadIdx.x;
    s[tid] = 0;  // shared traffic for the profile to see
    if (tid == 0)
        out[0] = 0;
    for (int i = 1; i < n; ++i) {
        __syncthreads();  // out[i - 1] is final
        if (tid == i % BLOCK_SIZE)
            out[i] = out[i - 1] + in[i - 1];
    }
}
