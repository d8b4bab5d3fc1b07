// Part 4: exclusive scan of any length (hierarchical).
//
// Write the two kernels below. The grader puts a header before this file that defines
//   #define BLOCK_SIZE <threads per block>   (a power of two from 32 to 1024; Part 4 has its
//                                            own value in the config)
//   typedef <element type> scan_t;           (int or float: every part is graded with both;
//                                            write nothing type-specific)
// and declares the kernels: do not define BLOCK_SIZE or scan_t yourself, and keep the signatures
// exactly as they are. The grader does all the host work (memory, copies, every launch).
// Headers: only the standard C, C++ and CUDA headers that README.md lists ("What the grader gives
// you"), in angle brackets; nothing else (no file of your own, no CUB, no Thrust) is compiled.
//
// Contract: an exclusive scan of any n >= 1, out[0] = 0 and out[i] = in[0] + ... + in[i-1].
// The array is cut into tiles of 2 * BLOCK_SIZE elements; the last tile may be partial.
//   1. scan_tiles(in, out, tile_sums, n) is launched with grid ceil(n / (2 * BLOCK_SIZE)),
//      block BLOCK_SIZE and 2 * BLOCK_SIZE * sizeof(scan_t) bytes of dynamic shared memory.
//      Block b scans tile b, the elements [b * 2 * BLOCK_SIZE, (b + 1) * 2 * BLOCK_SIZE) that are
//      < n, exclusively into out, and writes the tile's total to tile_sums[b].
//   2. The grader scans tile_sums the same way (recursively, with your kernels).
//   3. add_tile_offsets(out, tile_offsets, n) is launched with the same grid and block and no
//      dynamic shared memory: block b adds tile_offsets[b] to each element of tile b that is < n.
//   Read only in[0 .. n-1], write only out[0 .. n-1], and never modify in.
//
// Algorithm: GPU Gems 3, section 39.2.4, each tile scanned with your Part 2 (Blelloch) scan.

__global__ void scan_tiles(const scan_t* in, scan_t* out, scan_t* tile_sums, int n)
{
    // TODO: declare the shared memory the grader provides:
    //       extern __shared__ scan_t s[];   (2 * BLOCK_SIZE elements, one tile)

    // TODO: find this block's tile: it starts at blockIdx.x * 2 * BLOCK_SIZE.

    // TODO: load two elements per thread (e.g. tile positions threadIdx.x and
    //       threadIdx.x + BLOCK_SIZE, so that the loads are coalesced). The last tile may be
    //       partial: slots whose global index is >= n get the identity 0 and in[] is never read
    //       at or past n.

    // TODO: up-sweep over the tile, as in Part 2 (a __syncthreads() before each level).

    // TODO: the root now holds the tile's total: one thread writes it to tile_sums[blockIdx.x],
    //       then sets the root to 0.

    // TODO: down-sweep, as in Part 2 (a __syncthreads() before each level).

    // TODO: __syncthreads(), then store the elements whose global index is < n into out
    //       (nothing past n: the last tile may be partial).
}

__global__ void add_tile_offsets(scan_t* out, const scan_t* tile_offsets, int n)
{
    // TODO: read tile_offsets[blockIdx.x], the sum of every element before this tile.

    // TODO: add it to the (up to) two elements of the tile this thread handles, only where the
    //       global index is < n.
}
