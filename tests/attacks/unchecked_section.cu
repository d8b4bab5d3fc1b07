// ATTACK unchecked_section: the kernel of unchecked_hooks.cu (a race on `flag`, a read of
// in[n]; its output is right), with no asm statement and no runtime name as an identifier: a
// `section` attribute whose string GCC writes into the assembly as it is, defining the labels
// __tsan_read4 and __tsan_write4 at a `ret`, so the instrumentation's calls return at once (36/36
// before). Expected: a compile error naming the attribute and the line (the attributes that bind a
// symbol to a string are compile errors under the emulator), and were it compiled, the object
// audit would refuse its definitions of the runtime's names.

extern "C" __attribute__((used, section(".text.sg_a\n__tsan_read4:\n__tsan_write4:\n\tret\n\t.section .text.sg_b")))
void sg_nothing(void) {}

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
