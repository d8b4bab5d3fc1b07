// Part 4 (part4_any_size). BUG: the reference up to n = 70,000 (the shipped emulator.checks_max_n);
// above it, scan_tiles builds each tile's prefix by adding every thread's pair into the offset of
// every later warp with a plain `+=` on shared words (`offsets[w] += a + b`): all the threads of the
// warps before w update offsets[w] at once, with no atomic and no barrier between them. On a GPU
// those read-modify-writes interleave and updates are lost (the lanes of a warp load the word
// together, add, and store one sum each). On the emulator without checks each `+=` runs alone (a
// thread switches only at barriers, atomics, volatile and warp intrinsics), so every order gives the
// exact sum: before the checks reached every size this scored 42/42 there (issue 38).
// EXPECTED: fail, kind race, naming the `+=` line, at every case above emulator.checks_max_n (the
// checks on sampled blocks; the random order's switches at memory accesses may also lose updates),
// pass at the cases up to it (tests/grading/test_sampled_checks.py).

#define TILE (2 * BLOCK_SIZE)
#define NUM_WARPS (BLOCK_SIZE / 32)
#define FULL_MASK 0xffffffffu
#define RACY_ABOVE 70000

struct __align__(8) item_pair {
    scan_t v[2];
};

__device__ __forceinline__ bool aligned8(const void* p)
{
    return ((unsigned long long)p & 7) == 0;
}

// The warp's inclusive scan of the thread totals (Kogge-Stone with shuffles), as the reference.
__device__ __forceinline__ scan_t warp_inclusive(scan_t v, int lane)
{
#pragma unroll
    for (int d = 1; d < 32; d *= 2) {
        scan_t t = __shfl_up_sync(FULL_MASK, v, d);
        if (lane >= d)
            v = v + t;
    }
    return v;
}

__global__ void scan_tiles(const scan_t* in, scan_t* out, scan_t* tile_sums, int n)
{
    extern __shared__ scan_t smem[];  // the reference: the warp totals; above RACY_ABOVE: the warp offsets
    const int tid = threadIdx.x;
    const int lane = tid % 32;
    const int warp = tid / 32;
    const int base = (int)blockIdx.x * TILE;
    const int count = n - base;
    const int i = 2 * tid;
    const bool vector_io = count >= TILE && aligned8(in) && aligned8(out);

    scan_t a, b;
    if (vector_io) {
        item_pair p = ((const item_pair*)(in + base))[tid];
        a = p.v[0];
        b = p.v[1];
    } else {
        a = (i < count) ? in[base + i] : (scan_t)0;
        b = (i + 1 < count) ? in[base + i + 1] : (scan_t)0;
    }
    const scan_t inclusive = warp_inclusive(a + b, lane);
    scan_t warp_offset;
    if (n <= RACY_ABOVE) {  // the reference: warp totals through shared memory, scanned by every warp
        if (lane == 31)
            smem[warp] = inclusive;
        __syncthreads();
        scan_t w = (lane < NUM_WARPS) ? smem[lane] : (scan_t)0;
#pragma unroll
        for (int d = 1; d < NUM_WARPS; d *= 2) {
            scan_t t = __shfl_up_sync(FULL_MASK, w, d);
            if (lane >= d)
                w = w + t;
        }
        warp_offset = __shfl_sync(FULL_MASK, w, (warp > 0) ? warp - 1 : 0);
        if (warp == 0)
            warp_offset = 0;
    } else {  // BUG: many lanes update each offset at once, unsynchronised
        if (tid < NUM_WARPS)
            smem[tid] = 0;
        __syncthreads();
        for (int w = warp + 1; w < NUM_WARPS; ++w)
            smem[w] += a + b;
        __syncthreads();
        warp_offset = smem[warp];
    }
    scan_t lane_offset = __shfl_up_sync(FULL_MASK, inclusive, 1);
    scan_t first = (lane > 0) ? lane_offset : (scan_t)0;
    first = warp_offset + first;
    const scan_t second = first + a;
    if (tid == BLOCK_SIZE - 1)
        tile_sums[blockIdx.x] = second + b;

    if (vector_io) {
        item_pair p;
        p.v[0] = first;
        p.v[1] = second;
        ((item_pair*)(out + base))[tid] = p;
    } else {
        if (i < count)
            out[base + i] = first;
        if (i + 1 < count)
            out[base + i + 1] = second;
    }
}

__global__ void add_tile_offsets(scan_t* out, const scan_t* tile_offsets, int n)
{
    const int tid = threadIdx.x;
    const int base = (int)blockIdx.x * TILE;
    const int count = n - base;
    const scan_t offset = tile_offsets[blockIdx.x];
    if (tid < count)
        out[base + tid] = out[base + tid] + offset;
    if (tid + BLOCK_SIZE < count)
        out[base + tid + BLOCK_SIZE] = out[base + tid + BLOCK_SIZE] + offset;
}
