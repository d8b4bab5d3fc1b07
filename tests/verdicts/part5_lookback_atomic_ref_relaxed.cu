// Part 5 (part5_single_pass). BROKEN: part5_lookback_atomic_ref.cu with memory_order_relaxed for the
// flag's store and load: relaxed atomics order nothing else, so the value's plain store and load are
// a data race between the blocks (the PTX memory model), and the value read may be the old one.
// EXPECTED: fail (race) where a tile reads its predecessor.
#include <cuda/atomic>

#define TILE_ITEMS (BLOCK_SIZE * ITEMS_PER_THREAD)

__device__ unsigned int bits_of(scan_t value)
{
    unsigned int bits;
    memcpy(&bits, &value, sizeof bits);
    return bits;
}

__device__ scan_t value_of(unsigned int bits)
{
    scan_t value;
    memcpy(&value, &bits, sizeof value);
    return value;
}

__global__ void scan_single_pass(const scan_t* in, scan_t* out, int n, unsigned long long* tile_status,
                                 unsigned int* tile_counter)
{
    extern __shared__ scan_t s[];  // only the first BLOCK_SIZE elements are used
    __shared__ unsigned int ticket;
    __shared__ scan_t tile_prefix;
    int tid = threadIdx.x;

    if (tid == 0)
        ticket = atomicAdd(tile_counter, 1u);
    __syncthreads();
    int tile = (int)ticket;
    int base = tile * TILE_ITEMS;
    int count = n - base;
    int first = tid * ITEMS_PER_THREAD;

    scan_t x[ITEMS_PER_THREAD];
    scan_t total = 0;
    for (int i = 0; i < ITEMS_PER_THREAD; ++i) {
        x[i] = (first + i < count) ? in[base + first + i] : 0;
        total = total + x[i];
    }

    s[tid] = total;  // inclusive Hillis-Steele scan of the thread totals
    __syncthreads();
    for (int d = 1; d < BLOCK_SIZE; d *= 2) {
        scan_t v = s[tid];
        if (tid >= d)
            v = v + s[tid - d];
        __syncthreads();
        s[tid] = v;
        __syncthreads();
    }

    if (tid == 0) {
        // Tile t's status word as two 32-bit halves: half[2t] its inclusive prefix, half[2t + 1]
        // its flag (1: the prefix is there), the flag through cuda::atomic_ref.
        unsigned int* half = (unsigned int*)tile_status;
        scan_t exclusive = 0;
        if (tile > 0) {
            cuda::atomic_ref<unsigned int, cuda::thread_scope_device> flag(half[2 * (tile - 1) + 1]);
            while (flag.load(cuda::memory_order_relaxed) == 0) {
            }
            exclusive = value_of(half[2 * (tile - 1)]);  // LINE:ar_value_read
        }
        half[2 * tile] = bits_of(exclusive + s[BLOCK_SIZE - 1]);  // LINE:ar_value_store
        cuda::atomic_ref<unsigned int, cuda::thread_scope_device> mine(half[2 * tile + 1]);
        mine.store(1u, cuda::memory_order_relaxed);
        tile_prefix = exclusive;
    }
    __syncthreads();

    scan_t running = tile_prefix + (tid > 0 ? s[tid - 1] : (scan_t)0);
    for (int i = 0; i < ITEMS_PER_THREAD; ++i) {
        if (first + i < count)
            out[base + first + i] = running;
        running = running + x[i];
    }
}
