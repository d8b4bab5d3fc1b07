// CORRECT but SERIAL (passes every n; one thread does the whole scan): thread 0 of block 0 loops over the whole array, every other block only writes its tile sum 0, and add_tile_offsets has nothing to add. Worth every correctness point and none of the speed: the emulator's roofline bounds it thousands of times the reference (its span grows with n), and a GPU times it far slower.
//
// What a student may hand in to get the cases passing before writing the hierarchy. The tile sums
// are all 0, so the grader's recursive pass over them gives offsets 0 and add_tile_offsets changes
// nothing.

__global__ void scan_tiles(const scan_t* in, scan_t* out, scan_t* tile_sums, int n)
{
    if (threadIdx.x != 0)
        return;
    tile_sums[blockIdx.x] = 0;
    if (blockIdx.x != 0)
        return;
    scan_t running = 0;
    for (int i = 0; i < n; ++i) {
        scan_t x = in[i];
        out[i] = running;
        running += x;
    }
}

__global__ void add_tile_offsets(scan_t* out, const scan_t* tile_offsets, int n)
{
}
