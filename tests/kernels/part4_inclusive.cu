// BROKEN (wrong scan): a consistently INCLUSIVE Part 4 (tiles scanned inclusively, each tile offset taken from the previous tile's inclusive sum); returns exactly the inclusive scan, so it is wrong at every n (out[0] = in[0], not 0).
//
// The student read the task as an inclusive scan and made both kernels agree: the grader's
// recursive pass over tile_sums uses this same scan_tiles, so tile_offsets[b] is the sum of
// tiles 0..b, and add_tile_offsets uses tile_offsets[b - 1] (0 for the first tile).

__global__ void scan_tiles(const scan_t* in, scan_t* out, scan_t* tile_sums, int n)
{
    extern __shared__ scan_t s[];  // 2 * BLOCK_SIZE elements: one tile
    int tid = threadIdx.x;
    int base = (int)blockIdx.x * (2 * BLOCK_SIZE);  // first element of this tile; base < n
    int count = n - base;  // elements of the array from base on: >= 1, may exceed the tile
    int ai = tid;  // the two slots of this thread; consecutive threads read consecutive
    int bi = tid + BLOCK_SIZE;  // addresses, so both loads are coalesced

    // Load the tile; past the end of the array (the last, partial tile) pad with the identity.
    s[ai] = (ai < count) ? in[base + ai] : 0;
    s[bi] = (bi < count) ? in[base + bi] : 0;

    // Up-sweep (reduce), as in Part 2.
    int offset = 1;
    for (int d = BLOCK_SIZE; d > 0; d /= 2) {
        __syncthreads();  // loads / previous level complete
        if (tid < d) {
            int left = offset * (2 * tid + 1) - 1;
            int right = offset * (2 * tid + 2) - 1;
            s[right] = s[right] + s[left];
        }
        offset *= 2;
    }

    // The root holds the tile's total (padding adds 0): record it, then clear the root. Thread 0
    // did the last up-sweep level itself, so no barrier is needed before reading the root.
    if (tid == 0) {
        tile_sums[blockIdx.x] = s[2 * BLOCK_SIZE - 1];
        s[2 * BLOCK_SIZE - 1] = 0;
    }

    // Down-sweep, as in Part 2.
    for (int d = 1; d <= BLOCK_SIZE; d *= 2) {
        offset /= 2;
        __syncthreads();  // previous level / cleared root complete
        if (tid < d) {
            int left = offset * (2 * tid + 1) - 1;
            int right = offset * (2 * tid + 2) - 1;
            scan_t t = s[left];
            s[left] = s[right];
            s[right] = s[right] + t;
        }
    }
    __syncthreads();  // last level complete before storing slots other threads wrote

    // Store only the elements that exist (coalesced, like the loads).
    // "Add the element itself": makes each tile inclusive, so the whole result is inclusive.
    if (ai < count)
        out[base + ai] = s[ai] + in[base + ai];
    if (bi < count)
        out[base + bi] = s[bi] + in[base + bi];
}

__global__ void add_tile_offsets(scan_t* out, const scan_t* tile_offsets, int n)
{
    int tid = threadIdx.x;
    int base = (int)blockIdx.x * (2 * BLOCK_SIZE);
    int count = n - base;
    // Inclusive tile offsets: the sum of the tiles before this one is the previous entry.
    scan_t offset = (blockIdx.x > 0) ? tile_offsets[blockIdx.x - 1] : 0;

    if (tid < count)
        out[base + tid] = out[base + tid] + offset;
    if (tid + BLOCK_SIZE < count)
        out[base + tid + BLOCK_SIZE] = out[base + tid + BLOCK_SIZE] + offset;
}
