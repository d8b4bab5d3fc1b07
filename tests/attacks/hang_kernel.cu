// ATTACK hang_kernel: a kernel whose thread 0 never finishes (a busy loop on a volatile counter;
// every other thread waits for it at the barrier). Expected: the case is graded as a timeout
// within timeouts.case_s, the rest not run, no process left behind; on a GPU the same.

__global__ void naive_scan(const scan_t* in, scan_t* out, int n)
{
    if (threadIdx.x == 0) {
        volatile unsigned long spin = 0;
        for (;;)
            spin = spin + 1;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        scan_t sum = 0;
        for (int i = 0; i < n; ++i) {
            sum += in[i];
            out[i] = sum;
        }
    }
}
