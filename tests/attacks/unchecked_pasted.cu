// ATTACK unchecked_pasted: the same kernel as unchecked_hooks.cu (a race on `flag`, a read of
// in[n]), which hides `no_sanitize_thread` from a scan of its text by pasting it together in a
// macro. Expected: the attribute has no effect (the prelude defines it away), so --checks still
// reports the race and the out-of-bounds read and no case passes.

#define SG_GLUE(a, b) a##b
#define SG_UNCHECKED __attribute__((SG_GLUE(no_, sanitize_thread)))

__global__ SG_UNCHECKED void naive_scan(const scan_t* in, scan_t* out, int n)
{
    __shared__ int flag;
    extern __shared__ scan_t buf[];
    int tid = threadIdx.x;
    flag = 1;  // every thread, no barrier: a write-write race (same value)
    int src = 0;
    buf[src + tid] = (tid <= n) ? in[tid] : 0;  // reads in[n]
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
        out[tid] = buf[src + tid] + (flag - 1);
}
