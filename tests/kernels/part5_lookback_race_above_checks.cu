// Part 5 (part5_single_pass). BUG: the reference's decoupled look-back (without its sm_90 bulk
// copies) up to n = 70,000 (the shipped emulator.checks_max_n); above it, the look-back adds up each
// window of 32 predecessors with a plain `+=` of every lane of warp 0 on one shared word
// (`*window_sum += v`) instead of a shuffle reduction: the 32 read-modify-writes race, and on a GPU
// the lanes load the word together and store one value each, so the predecessors' sum loses terms
// (a lane that adds 0 can even store over the one that added the aggregate). On the emulator
// without checks each `+=` runs alone (a thread switches only at barriers, atomics, volatile and
// warp intrinsics), so every order gives the exact sum: before the checks reached every size this
// passed every case there (issue 38).
// EXPECTED: fail, kind race, naming the `+=` line, at every case above emulator.checks_max_n whose
// sampled blocks look back (the checks on sampled blocks, every block run; the random order's
// switches at memory accesses may also lose terms: a mismatch), pass at the cases up to it
// (tests/grading/test_sampled_checks.py).

#define TILE_ITEMS (BLOCK_SIZE * ITEMS_PER_THREAD)
#define NUM_WARPS (BLOCK_SIZE / 32)
#define FULL_MASK 0xffffffffu
#define RACY_ABOVE 70000

static_assert(sizeof(scan_t) == 4, "the status word packs a 32-bit value");

constexpr unsigned int STATUS_INVALID = 0;    // X: nothing published yet
constexpr unsigned int STATUS_AGGREGATE = 1;  // A: the sum of this tile alone
constexpr unsigned int STATUS_PREFIX = 2;     // P: the sum of this tile and every tile before it

__device__ __forceinline__ unsigned long long pack_status(unsigned int flag, scan_t value)
{
    unsigned int bits;
    memcpy(&bits, &value, sizeof bits);
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
    *(volatile unsigned long long*)p = pack_status(flag, value);  // flag and value in one 64-bit store
}

__device__ __forceinline__ scan_t warp_sum(scan_t v)
{
#pragma unroll
    for (int d = 16; d > 0; d /= 2)
        v = v + __shfl_xor_sync(FULL_MASK, v, d);
    return v;
}

// Called by the 32 lanes of warp 0: the sum of every element before tile `tile` (> 0).
__device__ scan_t look_back(const unsigned long long* tile_status, int tile, int lane, int n, scan_t* window_sum)
{
    scan_t exclusive = 0;
    int nearest = tile - 1;
    for (;;) {
        int pred = nearest - lane;
        unsigned long long word = (pred >= 0) ? *(const volatile unsigned long long*)(tile_status + pred)
                                              : pack_status(STATUS_PREFIX, 0);
        unsigned int flag = (unsigned int)(word >> 32);
        unsigned int invalid = __ballot_sync(FULL_MASK, flag == STATUS_INVALID);
        unsigned int prefix = __ballot_sync(FULL_MASK, flag == STATUS_PREFIX);
        unsigned int needed = prefix ? (prefix ^ (prefix - 1)) : FULL_MASK;
        if (invalid & needed) {
            __nanosleep(64);
            continue;
        }
        scan_t v = ((needed >> lane) & 1) ? status_value(word) : (scan_t)0;
        if (n <= RACY_ABOVE) {
            exclusive = exclusive + warp_sum(v);
        } else {  // BUG: every lane adds its term to one shared word at once, unsynchronised
            if (lane == 0)
                *window_sum = 0;
            __syncwarp();
            *window_sum += v;
            __syncwarp();
            exclusive = exclusive + *window_sum;
            __syncwarp();  // every lane has read it before lane 0 zeroes it for the next window
        }
        if (prefix)
            return exclusive;
        nearest -= 32;
    }
}

__global__ void scan_single_pass(const scan_t* in, scan_t* out, int n, unsigned long long* tile_status,
                                 unsigned int* tile_counter)
{
    extern __shared__ scan_t tile_smem[];
    __shared__ scan_t warp_totals[NUM_WARPS];
    __shared__ scan_t tile_exclusive;
    __shared__ scan_t window_sum;
    __shared__ int ticket;
    const int lane = threadIdx.x % 32;
    const int warp = threadIdx.x / 32;

    if (threadIdx.x == 0)
        ticket = (int)atomicAdd(tile_counter, 1u);  // tile index: blocks wait only on running blocks
    __syncthreads();
    const int tile = ticket;
    const int base = tile * TILE_ITEMS;
    const int count = n - base;
    for (int j = threadIdx.x; j < TILE_ITEMS; j += BLOCK_SIZE)
        tile_smem[j] = (j < count) ? in[base + j] : (scan_t)0;
    __syncthreads();

    scan_t* mine = tile_smem + threadIdx.x * ITEMS_PER_THREAD;
    scan_t thread_total = 0;
    for (int i = 0; i < ITEMS_PER_THREAD; ++i)
        thread_total = thread_total + mine[i];
    scan_t inclusive = thread_total;
#pragma unroll
    for (int d = 1; d < 32; d *= 2) {
        scan_t t = __shfl_up_sync(FULL_MASK, inclusive, d);
        if (lane >= d)
            inclusive = inclusive + t;
    }
    if (lane == 31)
        warp_totals[warp] = inclusive;
    __syncthreads();
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

    if (warp == 0) {
        scan_t exclusive = 0;
        if (tile == 0) {
            if (lane == 0)
                store_status(tile_status, STATUS_PREFIX, aggregate);
        } else {
            if (lane == 0)
                store_status(tile_status + tile, STATUS_AGGREGATE, aggregate);
            exclusive = look_back(tile_status, tile, lane, n, &window_sum);
            if (lane == 0)
                store_status(tile_status + tile, STATUS_PREFIX, exclusive + aggregate);
        }
        if (lane == 0)
            tile_exclusive = exclusive;
    }
    __syncthreads();

    scan_t running = tile_exclusive + warp_offset + (inclusive - thread_total);
    for (int i = 0; i < ITEMS_PER_THREAD; ++i) {
        scan_t v = mine[i];
        mine[i] = running;
        running = running + v;
    }
    __syncthreads();
    for (int j = threadIdx.x; j < TILE_ITEMS && j < count; j += BLOCK_SIZE)
        out[base + j] = tile_smem[j];
}
