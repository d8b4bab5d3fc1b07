// Part 5 (challenge): single-pass exclusive scan of any length, with decoupled look-back.
//
// Write the kernel below. The grader puts a header before this file that defines
//   #define BLOCK_SIZE <threads per block>        (a power of two from 32 to 1024; Part 5 has
//                                                  its own value in the config)
//   #define ITEMS_PER_THREAD <items per thread>   (a positive integer from the config)
//   typedef <element type> scan_t;                (int or float, 4 bytes: write nothing
//                                                  type-specific)
// and declares the kernel: do not define any of them yourself, and keep the signature exactly as
// it is. The grader does all the host work (memory, copies, the launch). Besides these, only the
// compiler's macros are defined: nvcc's (__CUDACC__, __NVCC__, __CUDA_ARCH__: 900 for an H100, on
// the CPU emulator too).
//
// Headers: only these may be included, in angle brackets (README.md, "What the grader gives you"):
//   CUDA: cuda.h, cuda_runtime.h, cuda_runtime_api.h, device_launch_parameters.h,
//         device_functions.h, cooperative_groups.h, cuda_fp16.h, math_constants.h,
//         sm_20_atomic_functions.h
//   libcu++: cuda/atomic, cuda/std/atomic (cuda::atomic_ref and its memory orders and scopes)
//   C:    assert.h, float.h, limits.h, math.h, stddef.h, stdint.h, stdio.h, stdlib.h, string.h
//   C++:  algorithm, cassert, cfloat, climits, cmath, cstddef, cstdint, cstdio, cstdlib, cstring,
//         limits, type_traits, utility
// Not CUB (<cub/cub.cuh> is refused): cub::DeviceScan is itself a single-pass scan with decoupled
// look-back, and cub::BlockScan / cub::WarpScan would write the tile's local scan for you; this
// part asks you to write both.
//
// Contract: exclusive scan of any n >= 1 in ONE launch, out[0] = 0 and
// out[i] = in[0] + ... + in[i-1].
//   The array is cut into tiles of TILE = BLOCK_SIZE * ITEMS_PER_THREAD elements (the last one may
//   be partial). Launched with grid ceil(n / TILE), block BLOCK_SIZE and
//   TILE * sizeof(scan_t) bytes of dynamic shared memory.
//   tile_status: one 64-bit word per tile (ceil(n / TILE) of them), all 0 at the start.
//   tile_counter: one unsigned int, 0 at the start.
//   Read only in[0 .. n-1], write only out[0 .. n-1] and tile_status[0 .. ceil(n / TILE) - 1],
//   and never modify in.
//
// Algorithm (Merrill & Garland 2016; see the handout):
//   - Each block takes a tile TICKET: t = atomicAdd(tile_counter, 1). Blocks need not start in
//     blockIdx order; with tickets, a block only ever waits on tiles of blocks already running.
//   - It scans tile t locally and publishes the tile's total (its AGGREGATE) in tile_status[t].
//   - It looks back at tiles t-1, t-2, ...: it adds up their aggregates until it reaches a tile
//     that has published its INCLUSIVE PREFIX (the sum of everything up to and including it),
//     waiting on a tile that has published nothing yet. Tile 0 needs no look-back.
//   - It publishes its own inclusive prefix, then writes its elements: exclusive sums within the
//     tile plus the sum of everything before the tile.
//   A status word holds a flag (0 = nothing yet, 1 = aggregate, 2 = inclusive prefix) and the
//   value: e.g. the flag in the high 32 bits and the value's 32 bits in the low 32 bits, written
//   with ONE 64-bit store and read with ONE 64-bit load, so that a flag is never seen without its
//   value. Read and write the words through a volatile pointer (or atomics), so that every read
//   really goes to memory.

__global__ void scan_single_pass(const scan_t* in, scan_t* out, int n, unsigned long long* tile_status,
                                 unsigned int* tile_counter)
{
    // TODO: declare the shared memory the grader provides:
    //       extern __shared__ scan_t s[];   (TILE elements)
    //       and, if you need them, small static ones (__shared__ unsigned int ticket; ...).

    // TODO: ticket: one thread takes t = atomicAdd(tile_counter, 1u) and shares it through shared
    //       memory; __syncthreads(). This block scans tile t, elements [t * TILE, (t + 1) * TILE)
    //       that are < n.

    // TODO: load the tile (the identity 0 past n; never read in[] at or past n). Coalesced loads
    //       are much faster: consecutive threads reading consecutive addresses.

    // TODO: scan the tile locally (exclusively) in shared memory or registers, and find the
    //       tile's total, its aggregate.

    // TODO: one thread (or one warp) publishes the status word of tile t: if t == 0 the inclusive
    //       prefix (flag 2) at once; otherwise the aggregate (flag 1), then looks back over
    //       t-1, t-2, ... (waiting while a flag is 0; adding aggregates; stopping after adding an
    //       inclusive prefix), then publishes its inclusive prefix (flag 2): the sum of everything
    //       before the tile plus the aggregate. Never read the status of a tile above t.

    // TODO: share the sum of everything before the tile through shared memory; __syncthreads().

    // TODO: write out[] for the elements of the tile that are < n: that sum plus the element's
    //       exclusive sum within the tile.
}
