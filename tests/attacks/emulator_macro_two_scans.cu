// Attack: one file, two kernels. Under `__SCANGRADE_EMULATOR__` (which the emulator's prelude used
// to define) a correct serial scan, for the emulator's checks; otherwise, for a GPU, Part 2's
// Blelloch scan with no barrier at all, which races. Graded on the emulator with the macro defined
// it passed every case under the official checks. Expected: no macro names the emulator, so the
// emulator compiles the Blelloch scan a GPU would run, and its checks fail it.

__global__ void blelloch_scan(const scan_t* in, scan_t* out, int n)
{
#ifdef __SCANGRADE_EMULATOR__
    if (threadIdx.x == 0) {
        scan_t sum = 0;
        for (int i = 0; i < n; ++i) {
            out[i] = sum;
            sum += in[i];
        }
    }
#else
    extern __shared__ scan_t s[];
    int tid = threadIdx.x;
    s[tid] = (tid < n) ? in[tid] : 0;
    s[tid + BLOCK_SIZE] = (tid + BLOCK_SIZE < n) ? in[tid + BLOCK_SIZE] : 0;
    int offset = 1;
    for (int d = BLOCK_SIZE; d > 0; d /= 2) {  // no __syncthreads(): a warp-synchronous hope
        if (tid < d)
            s[offset * (2 * tid + 2) - 1] += s[offset * (2 * tid + 1) - 1];
        offset *= 2;
    }
    if (tid == 0)
        s[2 * BLOCK_SIZE - 1] = 0;
    for (int d = 1; d <= BLOCK_SIZE; d *= 2) {
        offset /= 2;
        if (tid < d) {
            scan_t t = s[offset * (2 * tid + 1) - 1];
            s[offset * (2 * tid + 1) - 1] = s[offset * (2 * tid + 2) - 1];
            s[offset * (2 * tid + 2) - 1] += t;
        }
    }
    if (tid < n)
        out[tid] = s[tid];
    if (tid + BLOCK_SIZE < n)
        out[tid + BLOCK_SIZE] = s[tid + BLOCK_SIZE];
#endif
}
