// Part 5 reference: single-pass exclusive scan of any length, with decoupled look-back.
//
// Algorithm: D. Merrill and M. Garland, "Single-pass Parallel Prefix Scan with Decoupled
// Look-back" (NVIDIA technical report NVR-2016-002, 2016). One launch; every element is read once
// and written once (2n element moves, against 4n for Part 4's scan-then-propagate), so its bound
// at large n is the speed of a device-to-device copy, not half of it.
//
// Contract (the grader prepends BLOCK_SIZE, ITEMS_PER_THREAD, scan_t and the extern "C"
// declaration):
//   grid ceil(n / (BLOCK_SIZE * ITEMS_PER_THREAD)), block BLOCK_SIZE,
//   BLOCK_SIZE * ITEMS_PER_THREAD * sizeof(scan_t) bytes of dynamic shared memory;
//   tile_status: one 64-bit word per tile and *tile_counter, all zeroed by the grader before the
//   launch; n >= 1; out[0] = 0 and out[i] = in[0] + ... + in[i-1].
//   (This file also uses up to 144 bytes of static shared memory, and a block gets 48 KiB of
//   shared memory in all: BLOCK_SIZE * ITEMS_PER_THREAD * sizeof(scan_t) must leave room for it.)
//
// One block scans one tile of TILE = BLOCK_SIZE * ITEMS_PER_THREAD consecutive elements:
//   1. Ticket. Thread 0 takes the tile index from atomicAdd(tile_counter, 1). CUDA does not
//      promise to start blocks in blockIdx order; a block that waited on a lower blockIdx not yet
//      started could deadlock the GPU once it is full of waiters. A ticket is taken only by a
//      block that is running, so every tile a block waits on belongs to a running block.
//   2. Load. Each warp owns 32 * ITEMS_PER_THREAD consecutive elements. It reads them with
//      coalesced loads (16-byte loads when ITEMS_PER_THREAD is a multiple of 4, the tile is full
//      and in/out are 16-byte aligned; otherwise 4-byte loads), lane l taking pieces l, l + 32,
//      ..., and transposes them through shared memory so that lane l holds ITEMS_PER_THREAD
//      consecutive elements in registers.
//   3. Block scan. Each thread adds up its items; a warp-shuffle scan of the thread totals
//      (Kogge-Stone, 5 steps) gives each thread its offset within the warp; the warp totals go
//      through shared memory and a second, short shuffle scan gives each warp its offset within
//      the tile and the tile's total (its aggregate).
//   4. Decoupled look-back (warp 0). Publish the aggregate in this tile's status word, then read
//      the status words of the 32 preceding tiles at once (lane l reads tile - 1 - l). Wait
//      (with __nanosleep back-off) until every tile up to the nearest one with an inclusive
//      prefix has published something, add up the aggregates up to it and that prefix; if none
//      of the 32 has a prefix, add all 32 aggregates and move the window 32 tiles back. Then
//      publish this tile's inclusive prefix (exclusive prefix + aggregate). Only tiles with a
//      lower ticket are ever read, and tile 0 publishes its prefix at once, so this ends.
//   5. Store. Every thread turns its items into exclusive sums (plus the tile's, warp's and
//      thread's offsets) and the warp transposes them back through shared memory and stores them
//      with coalesced stores.
//
// Status word: flag in the high 32 bits (0 = nothing yet, 1 = aggregate, 2 = inclusive prefix),
// the 32 bits of the scan_t value in the low 32 bits. Flag and value travel in one 64-bit
// (single-copy atomic) store and are read with one 64-bit load, so a reader that sees a flag also
// sees its value, and no __threadfence is needed between them. (A design that stores the value
// apart from its flag needs a __threadfence() between the value and the flag, and a fence on the
// reader's side between reading the flag and reading the value.) The status words are written and
// read through volatile pointers: the loads then go to the L2, which every multiprocessor shares,
// and the compiler cannot keep a polled value in a register.

#define TILE_ITEMS (BLOCK_SIZE * ITEMS_PER_THREAD)
#define WARP_ITEMS (32 * ITEMS_PER_THREAD)  // one warp's segment of the tile
#define NUM_WARPS (BLOCK_SIZE / 32)
#define FULL_MASK 0xffffffffu

// Vector (16-byte) transposition: ITEMS_PER_THREAD a multiple of 4 keeps each thread's items in
// whole 16-byte chunks.
#if ITEMS_PER_THREAD % 4 == 0
#define VECTOR_ITEMS 1
#else
#define VECTOR_ITEMS 0
#endif

static_assert(sizeof(scan_t) == 4, "the status word packs a 32-bit value");

constexpr unsigned int STATUS_INVALID = 0;    // nothing published yet (the zeroed word)
constexpr unsigned int STATUS_AGGREGATE = 1;  // low word: the sum of this tile alone
constexpr unsigned int STATUS_PREFIX = 2;     // low word: the sum of this tile and all before it

// Four consecutive items, for 16-byte loads and stores.
struct __align__(16) item_quad {
    scan_t v[4];
};

__device__ __forceinline__ unsigned long long pack_status(unsigned int flag, scan_t value)
{
    unsigned int bits;
    memcpy(&bits, &value, sizeof bits);  // the value's bits, whatever scan_t is
    return ((unsigned long long)flag << 32) | bits;
}

__device__ __forceinline__ scan_t status_value(unsigned long long word)
{
    unsigned int bits = (unsigned int)word;
    scan_t value;
    memcpy(&value, &bits, sizeof value);
    return value;
}

__device__ __forceinline__ void store_status(unsigned long long* p, unsigned int flag, scan_t value)
{
    *(volatile unsigned long long*)p = pack_status(flag, value);  // one 64-bit store
}

__device__ __forceinline__ unsigned long long load_status(const unsigned long long* p)
{
    return *(const volatile unsigned long long*)p;  // one 64-bit load, from L2, every time
}

#if VECTOR_ITEMS
// ITEMS_PER_THREAD / 4 = 2^p * SWIZZLE_ROWS with SWIZZLE_ROWS odd.
__host__ __device__ constexpr int odd_part(int m) { return m % 2 ? m : odd_part(m / 2); }
constexpr int SWIZZLE_ROWS = odd_part(ITEMS_PER_THREAD / 4);
#endif

// Where item j of a warp's segment lives in shared memory. With 16-byte transposition the
// segment is seen as rows of 32 items (8 chunks of 4 items, one chunk per 4 banks). A 16-byte
// access by a warp is served 8 lanes at a time, without conflict when those 8 lanes touch 8
// different chunk columns. "Lane l takes chunk l of a row" (the global side) always does; "lane l
// takes its own ITEMS_PER_THREAD consecutive items" (the register side) does not when
// ITEMS_PER_THREAD / 4 is even, so the chunk column is XOR-ed with (row / SWIZZLE_ROWS) mod 8: a
// permutation inside each row, conflict-free for both patterns at every ITEMS_PER_THREAD that is
// a multiple of 4 up to 60, with no padding (checked by simulation).
__device__ __forceinline__ int swizzle(int j)
{
#if VECTOR_ITEMS
    return j ^ ((((j >> 5) / SWIZZLE_ROWS) & 7) << 2);
#else
    // 4-byte transposition: lane l's k-th items lie ITEMS_PER_THREAD words apart, in 32
    // different banks when ITEMS_PER_THREAD is odd (2-way conflicts when it is 2 mod 4).
    return j;
#endif
}

// Sum of v over the 32 lanes, in every lane.
__device__ __forceinline__ scan_t warp_sum(scan_t v)
{
#pragma unroll
    for (int d = 16; d > 0; d /= 2)
        v = v + __shfl_xor_sync(FULL_MASK, v, d);
    return v;
}

// Called by all 32 lanes of one warp: the sum of every element before tile `tile` (> 0).
__device__ __forceinline__ scan_t look_back(const unsigned long long* tile_status, int tile, int lane)
{
    scan_t exclusive = 0;
    int nearest = tile - 1;  // the predecessor lane 0 reads in this window
    unsigned int pause = 32;  // ns
    for (;;) {
        int pred = nearest - lane;
        // A window running past tile 0 sees prefixes 0: nothing is added for them.
        unsigned long long word = (pred >= 0) ? load_status(tile_status + pred)
                                              : pack_status(STATUS_PREFIX, 0);
        unsigned int flag = (unsigned int)(word >> 32);
        unsigned int invalid = __ballot_sync(FULL_MASK, flag == STATUS_INVALID);
        unsigned int prefix = __ballot_sync(FULL_MASK, flag == STATUS_PREFIX);
        // The lanes that count: up to and including the nearest prefix, or all 32 if none.
        unsigned int needed = prefix ? (prefix ^ (prefix - 1)) : FULL_MASK;
        if (invalid & needed) {  // a tile that counts has published nothing yet: wait, re-read
            __nanosleep(pause);
            pause = pause < 512 ? 2 * pause : 512;
            continue;
        }
        scan_t v = ((needed >> lane) & 1) ? status_value(word) : (scan_t)0;
        exclusive = exclusive + warp_sum(v);
        if (prefix)
            return exclusive;
        nearest -= 32;
    }
}

__global__ void __launch_bounds__(BLOCK_SIZE)
scan_single_pass(const scan_t* in, scan_t* out, int n, unsigned long long* tile_status,
                 unsigned int* tile_counter)
{
    extern __shared__ scan_t smem[];  // TILE_ITEMS: the tile, for the transpositions
    __shared__ scan_t warp_totals[NUM_WARPS];
    __shared__ scan_t tile_exclusive;
    __shared__ unsigned int ticket;

    const int lane = threadIdx.x % 32;
    const int warp = threadIdx.x / 32;

    // 1. Ticket: this block's tile, in the order blocks actually started.
    if (threadIdx.x == 0)
        ticket = atomicAdd(tile_counter, 1u);
    __syncthreads();
    const int tile = (int)ticket;
    const int base = tile * TILE_ITEMS;  // < n, so no overflow
    const int count = n - base;          // elements from base on; >= TILE_ITEMS for a full tile
    const int seg = warp * WARP_ITEMS;   // this warp's segment, relative to base
    scan_t* s = smem + seg;
#if VECTOR_ITEMS
    const bool vector_io = count >= TILE_ITEMS &&
        (((unsigned long long)in | (unsigned long long)out) & 15) == 0;
#endif

    // 2. Load, striped (coalesced), into the warp's segment of shared memory. All of a thread's
    // loads are issued before the first store, so they are in flight together.
#if VECTOR_ITEMS
    if (vector_io) {
        const item_quad* src = (const item_quad*)(in + base + seg);
        item_quad q[ITEMS_PER_THREAD / 4];
#pragma unroll
        for (int k = 0; k < ITEMS_PER_THREAD / 4; ++k)
            q[k] = src[k * 32 + lane];  // chunk k * 32 + lane of 4 items
#pragma unroll
        for (int k = 0; k < ITEMS_PER_THREAD / 4; ++k)
            *(item_quad*)(s + swizzle(4 * (k * 32 + lane))) = q[k];
    } else
#endif
    {
        scan_t v[ITEMS_PER_THREAD];
#pragma unroll
        for (int k = 0; k < ITEMS_PER_THREAD; ++k) {
            int j = k * 32 + lane;
            v[k] = (seg + j < count) ? in[base + seg + j] : (scan_t)0;  // pad with the identity
        }
#pragma unroll
        for (int k = 0; k < ITEMS_PER_THREAD; ++k)
            s[swizzle(k * 32 + lane)] = v[k];
    }
    __syncwarp();

    // ... and out of it, blocked: lane l holds items l*ITEMS_PER_THREAD ... of the segment.
    scan_t x[ITEMS_PER_THREAD];
#if VECTOR_ITEMS
#pragma unroll
    for (int m = 0; m < ITEMS_PER_THREAD / 4; ++m) {
        item_quad q = *(const item_quad*)(s + swizzle(lane * ITEMS_PER_THREAD + 4 * m));
#pragma unroll
        for (int i = 0; i < 4; ++i)
            x[4 * m + i] = q.v[i];
    }
#else
#pragma unroll
    for (int i = 0; i < ITEMS_PER_THREAD; ++i)
        x[i] = s[lane * ITEMS_PER_THREAD + i];
#endif

    // 3. Block scan. Thread total, then an inclusive shuffle scan of the totals over the warp.
    scan_t thread_total = x[0];
#pragma unroll
    for (int i = 1; i < ITEMS_PER_THREAD; ++i)
        thread_total = thread_total + x[i];
    scan_t inclusive = thread_total;
#pragma unroll
    for (int d = 1; d < 32; d *= 2) {
        scan_t t = __shfl_up_sync(FULL_MASK, inclusive, d);
        if (lane >= d)
            inclusive = inclusive + t;
    }
    scan_t thread_offset = __shfl_up_sync(FULL_MASK, inclusive, 1);  // exclusive, within the warp
    if (lane == 0)
        thread_offset = 0;
    if (lane == 31)
        warp_totals[warp] = inclusive;
    __syncthreads();  // every warp's total written (also: every lane done reading smem above)

    // Every warp scans the (at most 32) warp totals itself: its offset and the tile's total.
    scan_t w = (lane < NUM_WARPS) ? warp_totals[lane] : (scan_t)0;
#pragma unroll
    for (int d = 1; d < NUM_WARPS; d *= 2) {
        scan_t t = __shfl_up_sync(FULL_MASK, w, d);
        if (lane >= d)
            w = w + t;
    }
    const scan_t aggregate = __shfl_sync(FULL_MASK, w, NUM_WARPS - 1);
    scan_t warp_offset = __shfl_sync(FULL_MASK, w, warp > 0 ? warp - 1 : 0);
    if (warp == 0)
        warp_offset = 0;

    // 4. Decoupled look-back, by warp 0.
    if (warp == 0) {
        scan_t exclusive = 0;
        if (tile == 0) {
            if (lane == 0)
                store_status(tile_status, STATUS_PREFIX, aggregate);
        } else {
            if (lane == 0)
                store_status(tile_status + tile, STATUS_AGGREGATE, aggregate);
            exclusive = look_back(tile_status, tile, lane);
            if (lane == 0)
                store_status(tile_status + tile, STATUS_PREFIX, exclusive + aggregate);
        }
        if (lane == 0)
            tile_exclusive = exclusive;
    }
    __syncthreads();  // tile_exclusive written

    // 5. Exclusive sums in registers, transposed back through shared memory, stored striped.
    scan_t running = tile_exclusive + warp_offset + thread_offset;
#pragma unroll
    for (int i = 0; i < ITEMS_PER_THREAD; ++i) {
        scan_t v = x[i];
        x[i] = running;
        running = running + v;
    }
#if VECTOR_ITEMS
#pragma unroll
    for (int m = 0; m < ITEMS_PER_THREAD / 4; ++m) {
        item_quad q;
#pragma unroll
        for (int i = 0; i < 4; ++i)
            q.v[i] = x[4 * m + i];
        *(item_quad*)(s + swizzle(lane * ITEMS_PER_THREAD + 4 * m)) = q;
    }
#else
#pragma unroll
    for (int i = 0; i < ITEMS_PER_THREAD; ++i)
        s[lane * ITEMS_PER_THREAD + i] = x[i];
#endif
    __syncwarp();

#if VECTOR_ITEMS
    if (vector_io) {
        item_quad* dst = (item_quad*)(out + base + seg);
#pragma unroll
        for (int k = 0; k < ITEMS_PER_THREAD / 4; ++k) {
            int c = k * 32 + lane;
            dst[c] = *(const item_quad*)(s + swizzle(4 * c));
        }
    } else
#endif
    {
#pragma unroll
        for (int k = 0; k < ITEMS_PER_THREAD; ++k) {
            int j = k * 32 + lane;
            if (seg + j < count)
                out[base + seg + j] = s[swizzle(j)];
        }
    }
}
