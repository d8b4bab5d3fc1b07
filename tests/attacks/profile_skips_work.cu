// Attack: the bank-conflict profile's points without removing the conflicts. Part 2's Blelloch
// scan (unpadded: up to 32-way bank conflicts) submitted as Part 3, which returns at once in the
// first launch of its process unless n = 1. Every case passes (the cases' first launch is n = 1);
// the profiled launch, the first of the profile's own emulator, makes no shared access at all: 0
// wavefronts, full marks, unless its output is checked. (On the GPU path, where the profile runs
// on the emulator and the cases on the GPU, any test that tells the emulator apart does the same.)
// Every run now starts with fresh __device__ variables (docs/security.md): each case's run is a
// "first launch" too, so its cases of n > 1 fail and the profile is not scored.

__device__ int g_launches;  // 0 until this process's first launch

__global__ void blelloch_scan_cf(const scan_t* in, scan_t* out, int n)
{
    extern __shared__ scan_t s[];
    int first = (g_launches == 0);
    __syncthreads();  // every thread has read it before thread 0 writes it
    if (threadIdx.x == 0)
        g_launches = 1;
    if (first && n > 1)
        return;  // the output stays as the grader left it

    int tid = threadIdx.x;
    int ai = tid;
    int bi = tid + BLOCK_SIZE;
    s[ai] = (ai < n) ? in[ai] : 0;
    s[bi] = (bi < n) ? in[bi] : 0;

    int offset = 1;
    for (int d = BLOCK_SIZE; d > 0; d /= 2) {
        __syncthreads();
        if (tid < d) {
            int left = offset * (2 * tid + 1) - 1;
            int right = offset * (2 * tid + 2) - 1;
            s[right] = s[right] + s[left];
        }
        offset *= 2;
    }
    if (tid == 0)
        s[2 * BLOCK_SIZE - 1] = 0;
    for (int d = 1; d <= BLOCK_SIZE; d *= 2) {
        offset /= 2;
        __syncthreads();
        if (tid < d) {
            int left = offset * (2 * tid + 1) - 1;
            int right = offset * (2 * tid + 2) - 1;
            scan_t t = s[left];
            s[left] = s[right];
            s[right] = s[right] + t;
        }
    }
    __syncthreads();
    if (ai < n)
        out[ai] = s[ai];
    if (bi < n)
        out[bi] = s[bi];
}
