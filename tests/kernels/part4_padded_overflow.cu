// BROKEN (shared bounds): Part 4 with GPU Gems' bank-conflict padding (index + index / 32) on a shared tile of 2 * BLOCK_SIZE elements, which is all the grader's launch gives: the padded slots of the upper half lie past the end of the dynamic shared memory (slot 2 * BLOCK_SIZE - 1 + 15 at BLOCK_SIZE = 256). The scan is otherwise right (exclusive), so only a shared-memory bounds check catches it.

#define PAD(i) ((i) + ((i) >> 5))

__global__ void scan_tiles(const scan_t* in, scan_t* out, scan_t* tile_sums, int n)
{
    extern __shared__ scan_t s[];  // 2 * BLOCK_SIZE elements: one tile
    int tid = threadIdx.x;
    int base = (int)blockIdx.x * (2 * BLOCK_SIZE);  // first element of this tile; base < n
    int count = n - base;  // elements of the array from base on: >= 1, may exceed the tile
    int ai = tid;  // the two slots of this thread; consecutive threads read consecutive
    int bi = tid + BLOCK_SIZE;  // addresses, so both loads are coalesced

    // Load the tile; past the end of the array (the last, partial tile) pad with the identity.
    s[PAD(ai)] = (ai < count) ? in[base + ai] : 0;
    s[PAD(bi)] = (bi < count) ? in[base + bi] : 0;

    // Up-sweep (reduce), as in Part 2.
    int offset = 1;
    for (int d = BLOCK_SIZE; d > 0; d /= 2) {
        __syncthreads();  // loads / previous level complete
        if (tid < d) {
            int left = offset * (2 * tid + 1) - 1;
            int right = offset * (2 * tid + 2) - 1;
            s[PAD(right)] = s[PAD(right)] + s[PAD(left)];
        }
        offset *= 2;
    }

    // The root holds the tile's total (padding adds 0): record it, then clear the root. Thread 0
    // did the last up-sweep level itself, so no barrier is needed before reading the root.
    if (tid == 0) {
        tile_sums[blockIdx.x] = s[PAD(2 * BLOCK_SIZE - 1)];  // LINE:padded
        s[PAD(2 * BLOCK_SIZE - 1)] = 0;
    }

    // Down-sweep, as in Part 2.
    for (int d = 1; d <= BLOCK_SIZE; d *= 2) {
        offset /= 2;
        __syncthreads();  // previous level / cleared root complete
        if (tid < d) {
            int left = offset * (2 * tid + 1) - 1;
            int right = offset * (2 * tid + 2) - 1;
            scan_t t = s[PAD(left)];
            s[PAD(left)] = s[PAD(right)];
            s[PAD(right)] = s[PAD(right)] + t;
        }
    }
    __syncthreads();  // last level complete before storing slots other threads wrote

    // Store only the elements that exist (coalesced, like the loads).
    if (ai < count)
        out[base + ai] = s[PAD(ai)];
    if (bi < count)
        out[base + bi] = s[PAD(bi)];
}

__global__ void add_tile_offsets(scan_t* out, const scan_t* tile_offsets, int n)
{
    int tid = threadIdx.x;
    int base = (int)blockIdx.x * (2 * BLOCK_SIZE);
    int count = n - base;
    scan_t offset = tile_offsets[blockIdx.x];

    if (tid < count)
        out[base + tid] = out[base + tid] + offset;
    if (tid + BLOCK_SIZE < count)
        out[base + tid + BLOCK_SIZE] = out[base + tid + BLOCK_SIZE] + offset;
}
