// BROKEN (out of bounds): stores with i <= n, so thread n writes out[n], one past the end, for every n < BLOCK_SIZE; values are right, passes only n = BLOCK_SIZE.

__global__ void naive_scan(const scan_t* in, scan_t* out, int n)
{
    extern __shared__ scan_t buf[];
    int tid = threadIdx.x;

    int src = 0;
    buf[tid] = (tid < n) ? in[tid] : 0;
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

    if (tid <= n)  // off by one: should be tid < n
        out[tid] = buf[src + tid];
}
