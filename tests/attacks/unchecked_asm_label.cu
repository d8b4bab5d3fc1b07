// ATTACK unchecked_asm_label: the kernel of unchecked_hooks.cu (a race on `flag`, a read of
// in[n]; its output is right), which binds the runtime's hooks __tsan_read4 and __tsan_write4 to
// no-ops of its own through asm labels (`__asm__("__tsan_write4")`): the names are strings, which
// no check of identifiers sees (36/36 before). Expected: a compile error naming `__asm__` and the
// line (inline assembly is poisoned under the emulator).

extern "C" {
static void sg_nop_read(void*) __asm__("__tsan_read4");
static void sg_nop_write(void*) __asm__("__tsan_write4");
__attribute__((used)) static void sg_nop_read(void*) {}
__attribute__((used)) static void sg_nop_write(void*) {}
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
