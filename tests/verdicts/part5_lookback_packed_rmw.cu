// Part 5 (part5_single_pass). CORRECT: a chained scan whose tile status is one 64-bit word (the flag
// in the high half, the inclusive prefix in the low half), read and written only by atomics: the
// reader polls its predecessor's word with atomicAdd(&w, 0), the writer publishes its own with one
// atomicExch. A read-modify-write reads the latest value in coherence order, and one that leaves the
// word unchanged stores nothing (the PTX memory model), so no fence is needed: the prefix travels in
// the word that is read. (The shape of three public Part 5 kernels that failed on the emulator's
// earlier checks; issue 50.)
// EXPECTED: pass at every n.

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
        scan_t exclusive = 0;
        if (tile > 0) {
            unsigned long long w;
            while (((w = atomicAdd(&tile_status[tile - 1], 0ull)) >> 32) == 0) {
            }
            exclusive = value_of((unsigned int)w);
        }
        atomicExch(&tile_status[tile], (1ull << 32) | bits_of(exclusive + s[BLOCK_SIZE - 1]));
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
