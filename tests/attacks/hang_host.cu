// ATTACK hang_host: a static constructor that never returns (a busy loop), so loading the module
// never ends. Expected: graded as a timeout within timeouts.part_s, no process left behind.

__attribute__((constructor)) static void sg_attack(void)
{
    volatile unsigned long spin = 0;
    for (;;)
        spin = spin + 1;
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
