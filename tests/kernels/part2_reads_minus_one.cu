// BROKEN (shared bounds): a Blelloch down-sweep that runs one level too far; at that level offset is 0, so every thread reads (and writes) temp[-1], before the start of the shared array. The output is right, so only a shared-memory bounds check catches it; the read must be reported, the same way every run.

__global__ void blelloch_scan(const scan_t* in, scan_t* out, int n)
{
    extern __shared__ scan_t temp[];  // 2 * BLOCK_SIZE elements
    int tid = threadIdx.x;
    int ai = tid;
    int bi = tid + BLOCK_SIZE;

    temp[ai] = (ai < n) ? in[ai] : 0;
    temp[bi] = (bi < n) ? in[bi] : 0;

    int offset = 1;
    for (int d = BLOCK_SIZE; d > 0; d /= 2) {
        __syncthreads();
        if (tid < d) {
            int left = offset * (2 * tid + 1) - 1;
            int right = offset * (2 * tid + 2) - 1;
            temp[right] = temp[right] + temp[left];
        }
        offset *= 2;
    }
    if (tid == 0)
        temp[2 * BLOCK_SIZE - 1] = 0;

    for (int d = 1; d <= 2 * BLOCK_SIZE; d *= 2) {  // one level too many: should be d < 2 * BLOCK_SIZE
        offset /= 2;
        __syncthreads();
        if (tid < d) {
            int left = offset * (2 * tid + 1) - 1;
            int right = offset * (2 * tid + 2) - 1;
            scan_t t = temp[left];  // LINE:minus-one
            temp[left] = temp[right];
            temp[right] = temp[right] + t;
        }
    }
    __syncthreads();

    if (ai < n)
        out[ai] = temp[ai];
    if (bi < n)
        out[bi] = temp[bi];
}
