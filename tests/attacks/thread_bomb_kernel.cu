// ATTACK thread_bomb_kernel: the first thread of the first block starts 10,000 host threads with
// glibc's raw clone() (CLONE_VM | CLONE_THREAD ..., each on a stack of its own) that spin for ever,
// then scans correctly. The calls hide from the nvcc -ptx check behind #ifndef cudaStreamTailLaunch (a
// macro of nvcc's cuda_runtime.h that the emulator's stub headers lack).
// Expected: the executor's seccomp filter refuses the first clone: no case passes (a sandbox
// violation naming clone, thread creation), no thread is left (the test finds the executor by its
// module's path), and a classmate's grade is the grade it gets alone.

#ifndef cudaStreamTailLaunch
extern "C" int clone(int (*)(void*), void*, int, void*, ...);

static int sg_attack_spin(void*)
{
    volatile unsigned long spins = 0;
    for (;;)
        spins = spins + 1;
    return 0;
}
#endif

__global__ void naive_scan(const scan_t* in, scan_t* out, int n)
{
#ifndef cudaStreamTailLaunch
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        const int flags = 0x100 | 0x200 | 0x400 | 0x800 | 0x10000 | 0x40000;  // VM FS FILES SIGHAND THREAD SYSVSEM
        for (int i = 0; i < 10000; ++i) {
            char* stack = (char*)malloc(64 * 1024);
            if (stack)
                clone(sg_attack_spin, stack + 64 * 1024, flags, nullptr);
        }
    }
#endif
    if (threadIdx.x == 0) {  // correct, if slow: one thread scans serially
        scan_t sum = 0;
        for (int i = 0; i < n; ++i) {
            sum += in[i];
            out[i] = sum;
        }
    }
}
