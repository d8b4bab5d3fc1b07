// BROKEN (bounds): the load guard is `tid <= n`, so thread n reads in[n], one past the end of the input. On the emulator that reads the grader's poisoned guard zone; the value only reaches slots past n, so the output is right: only the checks (guard zones outside the buffer) catch it.

__global__ void naive_scan(const scan_t* in, scan_t* out, int n)
{
    extern __shared__ scan_t buf[];  // 2 * BLOCK_SIZE elements: two buffers of BLOCK_SIZE
    int tid = threadIdx.x;

    int src = 0;
    buf[src + tid] = (tid <= n) ? in[tid] : 0;  // should be tid < n
    __syncthreads();

    for (int offset = 1; offset < n; offset *= 2) {
        int dst = BLOCK_SIZE - src;
        scan_t v = buf[src + tid];
        if (tid >= offset)
            v = v + buf[src + tid - offset];
        buf[dst + tid] = v;
        src = dst;
        __syncthreads();
    }

    if (tid < n)
        out[tid] = buf[src + tid];
}
