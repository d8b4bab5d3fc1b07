// Part 2 (part2_blelloch). BUG: the tree spans m, n rounded up to a power of two (GPU Gems 3's
// scan assumes n is one), and the load has no `< n` bound: at a non-power-of-two n it reads
// in[n .. m-1], past the end of the input, instead of padding with the identity. Those values only
// ever reach tree slots at or after n, and a Blelloch scan's slot i receives sums of slots before
// i only, so the output is still right: only a bounds check catches the reads.
// EXPECTED: fail, kind out-of-bounds, at every non-power-of-two n; pass at powers of two.

__global__ void blelloch_scan(const scan_t* in, scan_t* out, int n)
{
    extern __shared__ scan_t temp[];  // 2 * BLOCK_SIZE elements
    int tid = threadIdx.x;
    int m = 1;
    while (m < n)
        m *= 2;  // tree size: n rounded up to a power of two (<= 2 * BLOCK_SIZE)

    int ai = tid;
    int bi = tid + BLOCK_SIZE;
    if (ai < m)
        temp[ai] = in[ai];  // missing: ai < n ? in[ai] : 0
    if (bi < m)
        temp[bi] = in[bi];

    int offset = 1;
    for (int d = m / 2; d > 0; d /= 2) {
        __syncthreads();
        if (tid < d) {
            int l = offset * (2 * tid + 1) - 1;
            int r = offset * (2 * tid + 2) - 1;
            temp[r] += temp[l];
        }
        offset *= 2;
    }
    if (tid == 0)
        temp[m - 1] = 0;
    for (int d = 1; d < m; d *= 2) {
        offset /= 2;
        __syncthreads();
        if (tid < d) {
            int l = offset * (2 * tid + 1) - 1;
            int r = offset * (2 * tid + 2) - 1;
            scan_t x = temp[l];
            temp[l] = temp[r];
            temp[r] += x;
        }
    }
    __syncthreads();

    if (ai < n)
        out[ai] = temp[ai];
    if (bi < n)
        out[bi] = temp[bi];
}
