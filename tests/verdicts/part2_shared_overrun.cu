// Part 2 (part2_blelloch). BUG: a static shared array of 2 * BLOCK_SIZE elements, and thread 0
// keeps the total "in the slot after the tree", temp[2 * BLOCK_SIZE], one element past the end of
// the array, before clearing the root. Nothing reads it back, so the output is right: only a
// shared-memory bounds check catches the write.
// EXPECTED: fail, kind out-of-bounds, at every n.

__global__ void blelloch_scan(const scan_t* in, scan_t* out, int n)
{
    __shared__ scan_t temp[2 * BLOCK_SIZE];
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
