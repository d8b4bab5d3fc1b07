// ATTACK unchecked_hooks: a Part 1 kernel with a data race (every thread writes `flag`, no barrier)
// and a read past the end of its input (`tid <= n`); its output is right, so only the checks see
// the bugs. It tries to switch them off: `no_sanitize_thread` on the kernel (no instrumentation, so
// no hook is called) and its own no-op definitions of the runtime's hooks __tsan_read4 and
// __tsan_write4 (weak, so the link does not fail). Expected: a compile error naming the line.

extern "C" __attribute__((weak)) void __tsan_read4(void*) {}
extern "C" __attribute__((weak)) void __tsan_write4(void*) {}

__global__ __attribute__((no_sanitize_thread)) void naive_scan(const scan_t* in, scan_t* out, int n)
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
