// ATTACK printf_flood_kernel: every thread of every launch prints 2,000 lines of device printf
// (about 30 MB a launch), hoping to fill the grader's memory, disk or report. The kernel is
// otherwise correct. Expected: the output is capped (64 KiB a launch under the emulator), the part
// passes, and the result and the report stay small.

__global__ void naive_scan(const scan_t* in, scan_t* out, int n)
{
    for (int k = 0; k < 2000; ++k)
        printf("flood thread %3d line %4d ................................................................\n",
               (int)threadIdx.x, k);
    if (threadIdx.x == 0) {
        scan_t sum = 0;
        for (int i = 0; i < n; ++i) {
            sum += in[i];
            out[i] = sum;
        }
    }
}
