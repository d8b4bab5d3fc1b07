// ATTACK alloc_host: a static constructor allocates 100 GiB with malloc and touches every page,
// then again with new[]. Expected: the sandbox's address-space limit makes the allocation fail
// (malloc returns NULL, and the write through it faults; new throws, and the uncaught exception
// aborts): the part is not graded as passed, and the grader itself is unharmed (the next part,
// an honest one, passes).

static const unsigned long long sg_attack_bytes = 100ull << 30;
volatile char sg_attack_sink;  // what is read back, so the compiler keeps every allocation and write

__attribute__((constructor)) static void sg_attack(void)
{
    volatile char* p = (volatile char*)malloc(sg_attack_bytes);
    for (unsigned long long i = 0; i < sg_attack_bytes; i += 4096)
        p[i] = 1;
    sg_attack_sink = p[sg_attack_bytes - 1];
    volatile char* q = new char[sg_attack_bytes];
    for (unsigned long long i = 0; i < sg_attack_bytes; i += 4096)
        q[i] = 1;
    sg_attack_sink = q[sg_attack_bytes - 1];
}

__global__ void naive_scan(const scan_t* in, scan_t* out, int n)
{
    if (threadIdx.x == 0) {  // correct, if slow: one thread scans serially
        scan_t sum = 0;
        for (int i = 0; i < n; ++i) {
            sum += in[i];
            out[i] = sum;
        }
    }
}
