// BROKEN (memory ordering): a chained scan (each tile waits for its predecessor's inclusive prefix) that keeps the prefix and its ready flag in the two 32-bit halves of the status word and writes them as two stores with no __threadfence() between them (and reads them with none). Its output is right at every n in practice on both backends (x86 keeps stores in order; on a GPU the two stores go to the same 8 bytes: 250 of 250 runs at n = 2^22 were right on an H200), so no output tells; the emulator's memory-order check does: every case with more than one tile fails as a race (memory order) naming the two stores a __threadfence() must separate (tests/backends/test_memory_order.py).
//
// Nothing in the CUDA memory model makes another block see two plain (even volatile) stores of
// one thread in the order they were issued, so a successor may see the flag and still read the
// old value, 0, as the prefix. With value and flag apart, a __threadfence() is needed between the
// two stores and another between the reader's load of the flag and its load of the value. The
// reference avoids both: flag and value travel in one 64-bit store and one 64-bit load.
// (Waiting for the predecessor's inclusive prefix, rather than decoupled look-back, also makes
// the tiles finish one after another: correct but slow.)

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

    // Inclusive Hillis-Steele scan of the thread totals, one buffer.
    s[tid] = total;
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
        scan_t aggregate = s[BLOCK_SIZE - 1];
        scan_t exclusive = 0;
        // Tile t's status word as two 32-bit halves: half[2t] its inclusive prefix, half[2t + 1]
        // the flag that says the prefix is there.
        volatile unsigned int* half = (volatile unsigned int*)tile_status;
        if (tile > 0) {
            while (half[2 * (tile - 1) + 1] == 0) {
            }  // wait for the predecessor's flag...
            // (missing: __threadfence(), so that the value is read after the flag)
            exclusive = value_of(half[2 * (tile - 1)]);  // ...then read its value
        }
        half[2 * tile] = bits_of(exclusive + aggregate);  // the value first...
        // (missing: __threadfence(), so that no other block can see the flag before the value)
        half[2 * tile + 1] = 1;  // ...then the flag
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
