// ATTACK unchecked_pasted_hooks: the kernel of unchecked_hooks.cu (a race on `flag`, a read of
// in[n]; its output is right, so only the checks see the bugs), which binds the runtime's hooks
// __tsan_read4 and __tsan_write4 to no-ops of its own: `static` functions whose names a macro
// pastes together (`SG_J(__ts, an_write4)`), so no scan of the written text sees them. GCC resolves
// the instrumentation's calls to the file's own definitions, and every checked case passes (36/36
// before). Expected: a compile error naming the name and the line (the names are poisoned after the
// prelude, so the compiler refuses them however they were spelled).

#define SG_J(a, b) a##b
extern "C" {
__attribute__((used)) static void SG_J(__ts, an_read4)(void*) {}
__attribute__((used)) static void SG_J(__ts, an_write4)(void*) {}
}

__global__ void naive_scan(const scan_t* in, scan_t* out, int n)
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
