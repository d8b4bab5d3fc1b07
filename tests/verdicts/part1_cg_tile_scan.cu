// Part 1 (part1_naive). CORRECT: a scan written with cooperative groups. The block is split into
// tiles of 16 threads (tiled_partition<16>); each tile scans its values with the tile's shfl_up
// (the tile's lanes as mask, 16 as width), the tile totals go to shared memory after the block's
// sync(), and one tile of 16 scans them (at BLOCK_SIZE 512 there are 32 totals: two rounds of 16,
// the second adding the first's total via shfl on the tile).
// EXPECTED: pass at every n.

#include <cooperative_groups.h>
namespace cg = cooperative_groups;

__global__ void naive_scan(const scan_t* in, scan_t* out, int n)
{
    __shared__ scan_t tile_total[BLOCK_SIZE / 16];
    cg::thread_block block = cg::this_thread_block();
    cg::thread_block_tile<16> tile = cg::tiled_partition<16>(block);
    int i = threadIdx.x;
    int r = tile.thread_rank();
    int t = tile.meta_group_rank();

    scan_t v = (i < n) ? in[i] : 0;
    for (int d = 1; d < 16; d *= 2) {
        scan_t up = tile.shfl_up(v, d);
        if (r >= d)
            v += up;
    }
    if (r == 15)
        tile_total[t] = v;
    block.sync();

    // The first tile scans the totals, 16 at a time, carrying the running sum.
    if (t == 0) {
        scan_t carry = 0;
        for (int first = 0; first < BLOCK_SIZE / 16; first += 16) {
            scan_t s = tile_total[first + r];
            for (int d = 1; d < 16; d *= 2) {
                scan_t up = tile.shfl_up(s, d);
                if (r >= d)
                    s += up;
            }
            tile_total[first + r] = s + carry;
            carry += tile.shfl(s, 15);
        }
    }
    block.sync();

    if (t > 0)
        v += tile_total[t - 1];
    if (i < n)
        out[i] = v;
}
