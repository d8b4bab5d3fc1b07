// BROKEN (out of bounds, a guard zone changed by arithmetic): a correct Part 4 scan whose add_tile_offsets has no i < n test, so the last, partial tile's threads add its offset to elements past the end of out (out[i] += off). The values below n are right; only the guard zone after out changes, by an addition: a poison value that addition cannot change (a huge float) would hide it.

__global__ void scan_tiles(const scan_t* in, scan_t* out, scan_t* tile_sums, int n)
{
    int base = (int)blockIdx.x * (2 * BLOCK_SIZE);  // first element of this tile; base < n
    int count = min(n - base, 2 * BLOCK_SIZE);
    if (threadIdx.x == 0) {  // one thread scans the tile, in order (slow, and right)
        scan_t sum = 0;
        for (int i = 0; i < count; ++i) {
            scan_t x = in[base + i];
            out[base + i] = sum;
            sum += x;
        }
        tile_sums[blockIdx.x] = sum;
    }
}

__global__ void add_tile_offsets(scan_t* out, const scan_t* tile_offsets, int n)
{
    int i = (int)blockIdx.x * (2 * BLOCK_SIZE) + threadIdx.x;
    scan_t off = tile_offsets[blockIdx.x];
    out[i] += off;  // no i < n
    out[i + BLOCK_SIZE] += off;
}
