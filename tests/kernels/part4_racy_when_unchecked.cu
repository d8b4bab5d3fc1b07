// Part 4 (part4_any_size). BUG, hidden from a grader whose graded run differs from its checked run:
// each tile is scanned correctly by its thread 0, but its tile sum comes from every thread adding
// its pair into one shared word with a plain `+=` (`total += a + b`), no atomic, no barrier between
// them, on the racy path only. On a GPU those read-modify-writes interleave and lose updates; on
// the emulator without checks each `+=` runs alone (threads switch at barriers, atomics, volatile
// accesses and warp intrinsics), so the sum is exact there and only the checks see the race.
//
// The gate (RACY_GATE, which tests/backends/test_vclock.py defines before the file; 1 when not defined):
//   1  the clock: thread 0 times 256 of its own loads with clock64() and the block takes the racy
//      path when they were fast (FAST_CYCLES): checked loads are slower than unchecked ones on a
//      host clock, so with one the checked runs take the safe path and the graded run the racy one.
//   2  a launch count: a __device__ variable counts the launches of scan_tiles (block 0's thread 0
//      adds one after its block read it); a block that reads 1 takes the racy path: the second
//      launch's (the scan of the tile sums), and a first launch's block that starts after block 0
//      counted. A grader whose runs keep the count shows launch 1 once in the module's life (the
//      second run of the first case); the launches of a later case's checked runs read 3, 4, ...
// EXPECTED: fail, kind race, naming the `+=` line, at every case above emulator.checks_max_n (the
// emulator's clocks are virtual and each graded run starts from the module's __device__ variables
// as loaded, so the checked runs take the path the graded run takes).

#ifndef RACY_GATE
#define RACY_GATE 1
#endif
#define TILE (2 * BLOCK_SIZE)
#define FAST_CYCLES 20000

__device__ int scan_launches;  // RACY_GATE 2: launches of scan_tiles so far

__global__ void scan_tiles(const scan_t* in, scan_t* out, scan_t* tile_sums, int n)
{
    extern __shared__ scan_t tile[];  // the tile's elements
    __shared__ scan_t total;
    __shared__ int racy;
    const int tid = threadIdx.x;
    const int base = (int)blockIdx.x * TILE;
    const int count = min(n - base, TILE);
    const int launch = *(volatile int*)&scan_launches;

    const scan_t a = (2 * tid < count) ? in[base + 2 * tid] : (scan_t)0;
    const scan_t b = (2 * tid + 1 < count) ? in[base + 2 * tid + 1] : (scan_t)0;
    tile[2 * tid] = a;
    tile[2 * tid + 1] = b;
    if (tid == 0) {
        total = 0;
#if RACY_GATE == 1
        volatile scan_t sink = 0;
        long long t0 = clock64();
        for (int k = 0; k < 256; ++k)
            sink = sink + in[(37 * k) % n];
        racy = clock64() - t0 < FAST_CYCLES;
#else
        racy = launch == 1;
#endif
    }
    __syncthreads();
    if (racy)
        total += a + b;  // BUG: every thread updates one shared word at once
    __syncthreads();
    if (tid == 0) {
        scan_t sum = 0;
        for (int j = 0; j < count; ++j) {
            out[base + j] = sum;
            sum = sum + tile[j];
        }
        tile_sums[blockIdx.x] = racy ? total : sum;
        if (blockIdx.x == 0)
            atomicAdd(&scan_launches, 1);
    }
}

__global__ void add_tile_offsets(scan_t* out, const scan_t* tile_offsets, int n)
{
    const int i = (int)blockIdx.x * TILE + threadIdx.x;
    const scan_t offset = tile_offsets[blockIdx.x];
    if (i < n)
        out[i] = out[i] + offset;
    if (i + BLOCK_SIZE < n)
        out[i + BLOCK_SIZE] = out[i + BLOCK_SIZE] + offset;
}
