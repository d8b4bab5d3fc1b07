// BROKEN (a full last tile taken as empty): a Part 4 scan whose last block counts its elements as
// n % TILE. That is right for a partial last tile and 0 for a full one, so when n is a multiple of
// the tile the last tile loads nothing (every element padded with 0) and stores zeros, to which
// add_tile_offsets adds the tile's offset: its elements all hold the sum before the tile. Nothing
// is read or written out of bounds; only the values show it, and only where n (or the number of
// tile sums at a higher level) is a multiple of the tile. In float32 its wrong elements differ by
// the tile's own partial sums, small beside the array's: the exact float32 cases must fail wherever
// int32 fails (issue 34, tests/grading/test_float32_checks.py).
//
// Each tile is scanned with Blelloch's up-sweep and down-sweep in shared memory (GPU Gems 3,
// section 39.2.2).

#define TILE (2 * BLOCK_SIZE)

__global__ void scan_tiles(const scan_t* in, scan_t* out, scan_t* tile_sums, int n)
{
    extern __shared__ scan_t s[];
    const int tid = threadIdx.x;
    const int base = (int)blockIdx.x * TILE;
    // The bug: a last tile of exactly TILE elements gets count 0.
    const int count = (blockIdx.x == gridDim.x - 1) ? n % TILE : TILE;

    s[tid] = (tid < count) ? in[base + tid] : (scan_t)0;
    s[tid + BLOCK_SIZE] = (tid + BLOCK_SIZE < count) ? in[base + tid + BLOCK_SIZE] : (scan_t)0;

    int offset = 1;
    for (int d = BLOCK_SIZE; d > 0; d >>= 1) {  // up-sweep: partial sums in place
        __syncthreads();
        if (tid < d) {
            const int ai = offset * (2 * tid + 1) - 1;
            const int bi = offset * (2 * tid + 2) - 1;
            s[bi] = s[bi] + s[ai];
        }
        offset *= 2;
    }
    __syncthreads();
    if (tid == 0) {
        tile_sums[blockIdx.x] = s[TILE - 1];
        s[TILE - 1] = 0;
    }
    for (int d = 1; d < TILE; d *= 2) {  // down-sweep: exclusive sums
        offset >>= 1;
        __syncthreads();
        if (tid < d) {
            const int ai = offset * (2 * tid + 1) - 1;
            const int bi = offset * (2 * tid + 2) - 1;
            const scan_t t = s[ai];
            s[ai] = s[bi];
            s[bi] = s[bi] + t;
        }
    }
    __syncthreads();
    if (tid < n - base)
        out[base + tid] = s[tid];
    if (tid + BLOCK_SIZE < n - base)
        out[base + tid + BLOCK_SIZE] = s[tid + BLOCK_SIZE];
}

__global__ void add_tile_offsets(scan_t* out, const scan_t* tile_offsets, int n)
{
    const int tid = threadIdx.x;
    const int base = (int)blockIdx.x * TILE;
    const scan_t offset = tile_offsets[blockIdx.x];
    if (tid < n - base)
        out[base + tid] = out[base + tid] + offset;
    if (tid + BLOCK_SIZE < n - base)
        out[base + tid + BLOCK_SIZE] = out[base + tid + BLOCK_SIZE] + offset;
}
