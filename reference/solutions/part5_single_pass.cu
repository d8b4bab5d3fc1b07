// Part 5 reference: single-pass exclusive scan of any length, with decoupled look-back.
//
// Algorithm: D. Merrill and M. Garland, "Single-pass Parallel Prefix Scan with Decoupled
// Look-back" (NVIDIA technical report NVR-2016-002, 2016). One launch; every element is read once
// and written once (2n element moves, against 4n for Part 4's scan-then-propagate and 3n for
// reduce-then-scan, the strategies the report's background section compares), so at large n the
// bound is the speed of a device-to-device copy. Section names below are the report's; their
// numbers were not checked against the PDF when this was written.
//
// Contract (the grader prepends BLOCK_SIZE, ITEMS_PER_THREAD, scan_t and the extern "C"
// declaration): grid ceil(n / TILE), block BLOCK_SIZE, TILE * sizeof(scan_t) bytes of dynamic
// shared memory, TILE = BLOCK_SIZE * ITEMS_PER_THREAD; tile_status (one 64-bit word per tile) and
// *tile_counter are zeroed before the launch; n >= 1; out[0] = 0, out[i] = in[0] + ... + in[i-1].
// Any BLOCK_SIZE (a power of two, 32 to 1024) and any ITEMS_PER_THREAD work (with at most 48 KiB
// of shared memory in all: the tile plus at most 144 bytes of static shared memory). Measured on an
// H100 (2^28 int32): 128 x 44 (tile 5632 elements, 22 KiB) 762 us = 93.7 % of a device-to-device
// copy, CUB's DeviceScan 877 us; at 256 x 24 this file takes 812 us.
//
// How one block scans one tile:
//   1. Ticket (the report's dynamic assignment of tile indices to blocks, in the order blocks run).
//      Thread 0 takes the tile index from atomicAdd(tile_counter, 1). CUDA does not start blocks
//      in blockIdx order, nor all at once; a ticket is only taken by a block that is running, so
//      every tile a block waits for in step 4 belongs to a running block and the look-back always
//      ends. blockIdx.x is used for one thing only: before asking for its ticket, thread 0 asks
//      the L2 to prefetch tile blockIdx.x (cp.async.bulk.prefetch.L2, sm_90). Tickets come back
//      close to blockIdx.x, though seldom equal to it, so the DRAM read of the tile this block (or
//      one started next to it) gets is already under way when the ticket returns: the ticket's
//      round trip and the load no longer add up. It is a hint; nothing depends on it for
//      correctness. (This prefetch alone took the previous reference from 926 to 811 us.)
//   2. Load. The tile goes from global to shared memory in one bulk copy (cp.async.bulk, the
//      Hopper copy engine), issued by thread 0 as soon as the ticket is known and completing on an
//      mbarrier that every thread waits on. No register holds data in flight, so a block needs few
//      registers, more blocks fit on a multiprocessor, and no __syncthreads follows the load.
//      Partial last tiles, buffers not 16-byte aligned, GPUs older than sm_90 and the CPU emulator
//      use plain coalesced loads into the same shared memory instead.
//   3. Local reduction and scan (the report's per-tile "reduce, then scan seeded with the
//      exclusive prefix"). Thread i owns the ITEMS_PER_THREAD consecutive elements from
//      i * ITEMS_PER_THREAD on and adds them up (16-byte shared loads; with ITEMS_PER_THREAD = 4 *
//      odd they have no bank conflicts); a warp-shuffle scan of the thread totals (Kogge-Stone, 5
//      steps), the warp totals through shared memory and a second shuffle scan give each thread
//      its offset in the tile and the tile's total (its aggregate).
//   4. Decoupled look-back (the report's central section: status flags X, A, P, and its
//      optimisations: a look-back parallelised over a warp, and flag and value packed into one
//      word), by warp 0: publish the aggregate (A) in this tile's status word (tile 0 publishes
//      its inclusive prefix, P, at once); read the status words of the 32 preceding tiles at once
//      (lane l reads tile - 1 - l); if a tile up to the nearest P has published nothing yet (X),
//      wait with __nanosleep back-off and read again; otherwise add the aggregates up to the
//      nearest P and that P's inclusive prefix (with no P among the 32: add all 32 aggregates and
//      move the window 32 tiles back). The sum is the tile's exclusive prefix; publish exclusive
//      prefix + aggregate as P. Only tiles with lower tickets are ever read.
//   5. Store. Each thread re-reads its elements from shared memory and writes their exclusive
//      sums (tile prefix + warp offset + thread offset + running sum) back in place; each warp
//      then stores its own part of the tile with coalesced 16-byte stores (a __syncwarp, not a
//      block barrier, separates the two).
//
// Status word: flag in the high 32 bits (0 = X, nothing yet; 1 = A, aggregate; 2 = P, inclusive
// prefix), the 32 bits of the scan_t value in the low 32 bits. Flag and value travel in one 64-bit
// store and are read with one 64-bit load, so a reader that sees a flag sees its value and no
// fence is needed between them. Status words are accessed through volatile pointers: the loads go
// to the L2 every time and cannot be hoisted out of the waiting loop.
//
// Three block-wide barriers per tile: after the ticket, after the warp totals, after the
// look-back. Tried and dropped (H100, 2^28 int32, against this design in the same runs): a
// bulk-copy store of the tile (0 to +15 us), reading 128 predecessors per look-back round trip
// (+50 us; probably because waiting tiles re-read 4x as many words), a speculative bulk load of
// tile blockIdx.x into shared memory (+50 to +450 us: tickets seldom equal blockIdx.x),
// prefetching tile blockIdx.x + 64 instead (-7 us, within the spread; + 256: +54 us), other
// __nanosleep back-offs (no change), 256-thread blocks (+50 us).

#define TILE_ITEMS (BLOCK_SIZE * ITEMS_PER_THREAD)
#define NUM_WARPS (BLOCK_SIZE / 32)
#define WARP_ITEMS (32 * ITEMS_PER_THREAD)  // a warp's part of the tile
#define FULL_MASK 0xffffffffu

// The bulk copy engine (and its L2 prefetch) exist from sm_90 on; older GPUs take the plain path.
// The CPU emulator compiles for the course's GPU (config target_arch, an H100: __CUDA_ARCH__ 900)
// and runs this inline PTX (docs/emulator.md, "Inline PTX").
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define BULK_COPY 1
#else
#define BULK_COPY 0
#endif

// Blocks a multiprocessor can hold: at most 32 blocks and 2048 threads, and 228 KiB of shared
// memory (sm_90) with 1 KiB reserved per block. Telling the compiler lets it use every register
// that does not lower that count (55 registers a thread at 128 x 44: 9 blocks of 128 threads).
#define BLOCKS_BY_THREADS (2048 / BLOCK_SIZE < 32 ? 2048 / BLOCK_SIZE : 32)
#define BLOCKS_BY_SMEM (233472 / (TILE_ITEMS * 4 + 1024 + 128))
#define MIN_BLOCKS (BLOCKS_BY_THREADS < BLOCKS_BY_SMEM ? BLOCKS_BY_THREADS : (BLOCKS_BY_SMEM > 0 ? BLOCKS_BY_SMEM : 1))

static_assert(sizeof(scan_t) == 4, "the status word packs a 32-bit value");
static_assert(TILE_ITEMS % 4 == 0, "a tile is whole 16-byte chunks");

constexpr unsigned int STATUS_INVALID = 0;    // X: nothing published yet (the zeroed word)
constexpr unsigned int STATUS_AGGREGATE = 1;  // A: low word is the sum of this tile alone
constexpr unsigned int STATUS_PREFIX = 2;     // P: low word is the sum of this tile and all before it

// Four consecutive items: one 16-byte load or store.
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
    int nearest = tile - 1;   // the predecessor lane 0 reads in this window
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

#if BULK_COPY
__device__ __forceinline__ unsigned int smem_address(const void* p)
{
    return (unsigned int)__cvta_generic_to_shared(p);
}

// Wait until the phase of the mbarrier at `bar` with this parity has completed.
__device__ __forceinline__ void mbarrier_wait(unsigned int bar, unsigned int parity)
{
    unsigned int done = 0;
    while (!done) {
        asm volatile("{\n\t.reg .pred p;\n\t"
                     "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
                     "selp.u32 %0, 1, 0, p;\n\t}"
                     : "=r"(done) : "r"(bar), "r"(parity) : "memory");
    }
}
#endif

__global__ void __launch_bounds__(BLOCK_SIZE, MIN_BLOCKS)
scan_single_pass(const scan_t* in, scan_t* out, int n, unsigned long long* tile_status,
                 unsigned int* tile_counter)
{
    extern __shared__ __align__(16) scan_t tile_smem[];  // the tile
    __shared__ scan_t warp_totals[NUM_WARPS];
    __shared__ scan_t tile_exclusive;
    __shared__ int ticket;
#if BULK_COPY
    __shared__ __align__(8) unsigned long long load_barrier;  // mbarrier of the bulk copy
#endif

    const int lane = threadIdx.x % 32;
    const int warp = threadIdx.x / 32;
    const bool aligned = ((((unsigned long long)in) | ((unsigned long long)out)) & 15) == 0;
    constexpr unsigned int TILE_BYTES = TILE_ITEMS * sizeof(scan_t);

    // 1. Ticket (and, on sm_90, the prefetch hint and the bulk copy of the tile).
    if (threadIdx.x == 0) {
#if BULK_COPY
        const unsigned int bar = smem_address(&load_barrier);
        const long long guess = (long long)blockIdx.x * TILE_ITEMS;
        if (aligned && n - guess >= TILE_ITEMS)
            asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" :: "l"(in + guess), "r"(TILE_BYTES) : "memory");
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(bar) : "memory");
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // the copy engine sees the init
#endif
        const int t = (int)atomicAdd(tile_counter, 1u);
        ticket = t;
#if BULK_COPY
        if (aligned && n - t * TILE_ITEMS >= TILE_ITEMS) {
            asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(bar), "r"(TILE_BYTES) : "memory");
            asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                         :: "r"(smem_address(tile_smem)), "l"(in + t * TILE_ITEMS), "r"(TILE_BYTES), "r"(bar)
                         : "memory");
        }
#endif
    }
    __syncthreads();  // ticket written (and the mbarrier initialised)

    const int tile = ticket;
    const int base = tile * TILE_ITEMS;  // < n, so no overflow
    const int count = n - base;          // elements from base on; >= TILE_ITEMS for a full tile
    const bool vector_io = count >= TILE_ITEMS && aligned;

    // 2. Load.
#if BULK_COPY
    if (vector_io) {
        mbarrier_wait(smem_address(&load_barrier), 0);
    } else
#endif
    {
        if (vector_io) {  // coalesced 16-byte loads
            const item_quad* src = (const item_quad*)(in + base);
            item_quad* dst = (item_quad*)tile_smem;
            for (int c = threadIdx.x; c < TILE_ITEMS / 4; c += BLOCK_SIZE)
                dst[c] = src[c];
        } else {  // a partial tile: pad with the identity
            for (int j = threadIdx.x; j < TILE_ITEMS; j += BLOCK_SIZE)
                tile_smem[j] = (j < count) ? in[base + j] : (scan_t)0;
        }
        __syncthreads();
    }

    // 3. Reduction: this thread's ITEMS_PER_THREAD consecutive items ...
    scan_t* mine = tile_smem + threadIdx.x * ITEMS_PER_THREAD;
    scan_t thread_total = 0;
#if ITEMS_PER_THREAD % 4 == 0
#pragma unroll
    for (int m = 0; m < ITEMS_PER_THREAD / 4; ++m) {
        item_quad q = ((const item_quad*)mine)[m];
        thread_total = thread_total + ((q.v[0] + q.v[1]) + (q.v[2] + q.v[3]));
    }
#else
#pragma unroll
    for (int i = 0; i < ITEMS_PER_THREAD; ++i)
        thread_total = thread_total + mine[i];
#endif
    // ... an inclusive shuffle scan of the thread totals over the warp ...
    scan_t inclusive = thread_total;
#pragma unroll
    for (int d = 1; d < 32; d *= 2) {
        scan_t t = __shfl_up_sync(FULL_MASK, inclusive, d);
        if (lane >= d)
            inclusive = inclusive + t;
    }
    if (lane == 31)
        warp_totals[warp] = inclusive;
    __syncthreads();  // every warp's total written
#if BULK_COPY
    if (threadIdx.x == 0)  // every thread is past its wait: retire the mbarrier
        asm volatile("mbarrier.inval.shared::cta.b64 [%0];" :: "r"(smem_address(&load_barrier)) : "memory");
#endif

    // ... and every warp scans the (at most 32) warp totals: its offset and the tile's aggregate.
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

    // 5. Exclusive sums, in place in shared memory ...
    scan_t running = tile_exclusive + warp_offset + (inclusive - thread_total);
#if ITEMS_PER_THREAD % 4 == 0
#pragma unroll
    for (int m = 0; m < ITEMS_PER_THREAD / 4; ++m) {
        item_quad q = ((const item_quad*)mine)[m];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            scan_t v = q.v[i];
            q.v[i] = running;
            running = running + v;
        }
        ((item_quad*)mine)[m] = q;
    }
#else
#pragma unroll
    for (int i = 0; i < ITEMS_PER_THREAD; ++i) {
        scan_t v = mine[i];
        mine[i] = running;
        running = running + v;
    }
#endif
    __syncwarp();  // this warp's part of the tile is written

    // ... and stored by each warp, coalesced.
    const int seg = warp * WARP_ITEMS;
    if (vector_io) {  // seg is a multiple of 32 elements: 16-byte aligned
        const item_quad* src = (const item_quad*)(tile_smem + seg);
        item_quad* dst = (item_quad*)(out + base + seg);
#pragma unroll
        for (int c = lane; c < WARP_ITEMS / 4; c += 32)
            dst[c] = src[c];
    } else {
        for (int j = lane; j < WARP_ITEMS && seg + j < count; j += 32)
            out[base + seg + j] = tile_smem[seg + j];
    }
}
