// BROKEN (race, last tile only): the reference Part 4 scan, but the last, partial tile takes a path
// of its own: every thread loads its two elements into shared memory, and thread 0 scans them in
// order without a __syncthreads() first, so it reads elements the other threads have not stored
// yet. Only the last tile is wrong, and its bounds are right: the race explains it, so the report's
// hint must not send the student to check the bounds (tests/grading/test_hints.py).

#define TILE (2 * BLOCK_SIZE)
#define NUM_WARPS (BLOCK_SIZE / 32)
#define FULL_MASK 0xffffffffu

// Two adjacent elements, for 8-byte loads and stores.
struct __align__(8) item_pair {
    scan_t v[2];
};

// Whether a pointer is 8-byte aligned (the grader's buffers are). A tile starts at an even
// element, so then every item_pair of a full tile is aligned too.
__device__ __forceinline__ bool aligned8(const void* p)
{
    return ((unsigned long long)p & 7) == 0;
}

__global__ void __launch_bounds__(BLOCK_SIZE)
scan_tiles(const scan_t* in, scan_t* out, scan_t* tile_sums, int n)
{
    extern __shared__ scan_t warp_totals[];  // only the first NUM_WARPS of the 2 * BLOCK_SIZE
    const int tid = threadIdx.x;
    const int lane = tid % 32;
    const int warp = tid / 32;
    const int base = (int)blockIdx.x * TILE;  // first element of this tile; base < n
    const int count = n - base;  // elements of the array from base on: >= 1, may exceed the tile
    const int i = 2 * tid;       // this thread's elements: i and i + 1 of the tile
    // Same for the whole block (no barrier depends on it).
    const bool vector_io = count >= TILE && aligned8(in) && aligned8(out);

    if (count < TILE) {  // the last, partial tile: loaded by every thread, scanned by thread 0 in order
        scan_t* s = warp_totals;  // the whole dynamic shared memory: 2 * BLOCK_SIZE elements
        s[i] = (i < count) ? in[base + i] : (scan_t)0;
        s[i + 1] = (i + 1 < count) ? in[base + i + 1] : (scan_t)0;
        // BUG: no __syncthreads() here: thread 0 reads elements the other threads have not stored yet
        if (tid == 0) {
            scan_t sum = 0;
            for (int j = 0; j < count; ++j) {
                scan_t x = s[j];
                out[base + j] = sum;
                sum = sum + x;
            }
            tile_sums[blockIdx.x] = sum;
        }
        return;
    }

    // 1. Load this thread's two elements; past the end of the array pad with the identity.
    scan_t a, b;
    if (vector_io) {
        item_pair p = ((const item_pair*)(in + base))[tid];
        a = p.v[0];
        b = p.v[1];
    } else {
        a = (i < count) ? in[base + i] : (scan_t)0;
        b = (i + 1 < count) ? in[base + i + 1] : (scan_t)0;
    }

    // 2. Inclusive scan of the thread totals a + b across the warp (Kogge-Stone with shuffles:
    // after the step with distance d, each lane holds the sum of up to 2d totals ending at it).
    scan_t inclusive = a + b;
#pragma unroll
    for (int d = 1; d < 32; d *= 2) {
        scan_t t = __shfl_up_sync(FULL_MASK, inclusive, d);
        if (lane >= d)
            inclusive = inclusive + t;
    }
    if (lane == 31)
        warp_totals[warp] = inclusive;  // this warp's total
    __syncthreads();  // every warp's total written

    // 3. Every warp scans the NUM_WARPS warp totals itself (no second barrier): lane w ends with
    // the sum of warps 0..w. This warp's offset is the sum of the warps before it.
    scan_t w = (lane < NUM_WARPS) ? warp_totals[lane] : (scan_t)0;
#pragma unroll
    for (int d = 1; d < NUM_WARPS; d *= 2) {
        scan_t t = __shfl_up_sync(FULL_MASK, w, d);
        if (lane >= d)
            w = w + t;
    }
    const scan_t warp_offset = __shfl_sync(FULL_MASK, w, (warp > 0) ? warp - 1 : 0);
    // Exclusive sums of this thread's two elements: everything before them in the tile. (The
    // sum of the earlier lanes is shuffled from the lane before, not computed by subtraction:
    // a scan needs only the + of its operator.)
    scan_t lane_offset = __shfl_up_sync(FULL_MASK, inclusive, 1);
    scan_t first = (lane > 0) ? lane_offset : (scan_t)0;
    if (warp > 0)
        first = warp_offset + first;
    const scan_t second = first + a;
    // The last thread's inclusive sum is the tile's total (padding adds 0).
    if (tid == BLOCK_SIZE - 1)
        tile_sums[blockIdx.x] = second + b;

    // 4. Store the elements that exist.
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

__global__ void __launch_bounds__(BLOCK_SIZE)
add_tile_offsets(scan_t* out, const scan_t* tile_offsets, int n)
{
    const int tid = threadIdx.x;
    const int base = (int)blockIdx.x * TILE;
    const int count = n - base;
    const scan_t offset = tile_offsets[blockIdx.x];  // sum of every element before this tile

    if (count >= TILE && aligned8(out)) {
        // A full tile: one 8-byte read-modify-write per thread, elements 2 * tid and 2 * tid + 1.
        item_pair* p = (item_pair*)(out + base) + tid;
        item_pair v = *p;
        v.v[0] = v.v[0] + offset;
        v.v[1] = v.v[1] + offset;
        *p = v;
    } else {
        // The last, partial tile: thread tid takes elements tid and tid + BLOCK_SIZE (coalesced).
        if (tid < count)
            out[base + tid] = out[base + tid] + offset;
        if (tid + BLOCK_SIZE < count)
            out[base + tid + BLOCK_SIZE] = out[base + tid + BLOCK_SIZE] + offset;
    }
}
