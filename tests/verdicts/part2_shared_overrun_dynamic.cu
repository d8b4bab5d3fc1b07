// Part 2 (part2_blelloch). BUG: part2_shared_overrun.cu with the dynamic shared memory the launch
// gives (2 * BLOCK_SIZE elements) instead of a static array: thread 0 keeps the total "in the slot
// after the tree", temp[2 * BLOCK_SIZE], one element past the end, before clearing the root.
// Nothing reads it back, so the output is right: only a shared-memory bounds check catches the
// write. (Past a static array, as in part2_shared_overrun.cu, a GPU's write lands in the dynamic
// shared memory that follows it, inside the block's shared memory, where memcheck cannot see it;
// past the dynamic part it leaves the block's shared memory.)
// EXPECTED: fail, kind out-of-bounds, at every n.

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
            int l = offset * (2 * tid + 1) - 1;
            int r = offset * (2 * tid + 2) - 1;
            temp[r] += temp[l];
        }
        offset *= 2;
    }
    if (tid == 0) {
        temp[2 * BLOCK_SIZE] = temp[2 * BLOCK_SIZE - 1];  // the total, one past the end
        temp[2 * BLOCK_SIZE - 1] = 0;
    }
    for (int d = 1; d <= BLOCK_SIZE; d *= 2) {
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
