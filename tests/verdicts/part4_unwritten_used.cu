// Part 4 (part4_any_size). BUG: no identity padding, and one bound for both loads: a thread loads
// its two elements only when the farther one, tid + BLOCK_SIZE, is in the array. In a partial tile
// the threads whose second element is past the end load neither, so the slots from
// count - BLOCK_SIZE (from 0 when count <= BLOCK_SIZE) up to BLOCK_SIZE are never written, and
// the exclusive sums after them add whatever that shared memory holds. Full tiles are right. The
// grader scans the tile sums with the same kernel, so a partial tile at any level spoils the
// output: at 513 and 2049 (a last tile of one element) the second level's 2 and 5 tile sums do.
// EXPECTED: fail, kind uninitialized-read (the lead may settle on mismatch), wherever a level has
// a partial tile of two or more elements (here n = 513, 1000, 2049); pass at n = 1 and 512.

__global__ void scan_tiles(const scan_t* in, scan_t* out, scan_t* tile_sums, int n)
{
    extern __shared__ scan_t s[];  // one tile: 2 * BLOCK_SIZE elements
    int tid = threadIdx.x;
    int base = blockIdx.x * 2 * BLOCK_SIZE;
    int count = n - base;  // elements from base on (more than a tile except in the last one)
    int ai = tid;
    int bi = tid + BLOCK_SIZE;

    if (bi < count) {  // "if my second element exists, so does my first"
        s[ai] = in[base + ai];
        s[bi] = in[base + bi];
    }

    int offset = 1;
    for (int d = BLOCK_SIZE; d > 0; d /= 2) {
        __syncthreads();
        if (tid < d) {
            int l = offset * (2 * tid + 1) - 1;
            int r = offset * (2 * tid + 2) - 1;
            s[r] += s[l];
        }
        offset *= 2;
    }
    if (tid == 0) {
        tile_sums[blockIdx.x] = s[2 * BLOCK_SIZE - 1];
        s[2 * BLOCK_SIZE - 1] = 0;
    }
    for (int d = 1; d <= BLOCK_SIZE; d *= 2) {
        offset /= 2;
        __syncthreads();
        if (tid < d) {
            int l = offset * (2 * tid + 1) - 1;
            int r = offset * (2 * tid + 2) - 1;
            scan_t x = s[l];
            s[l] = s[r];
            s[r] += x;
        }
    }
    __syncthreads();

    if (ai < count)
        out[base + ai] = s[ai];
    if (bi < count)
        out[base + bi] = s[bi];
}

__global__ void add_tile_offsets(scan_t* out, const scan_t* tile_offsets, int n)
{
    int base = blockIdx.x * 2 * BLOCK_SIZE;
    int count = n - base;
    scan_t offset = tile_offsets[blockIdx.x];
    if (threadIdx.x < count)
        out[base + threadIdx.x] += offset;
    if (threadIdx.x + BLOCK_SIZE < count)
        out[base + threadIdx.x + BLOCK_SIZE] += offset;
}
