// Part 5 (part5_single_pass). BROKEN: as part5_chain_polled.cu, but each predecessor's word is read
// once, not polled, on the reasoning that tile t - 1 saw it set before publishing its own. With no
// __threadfence() between tile t - 1's read and its store, a GPU may still give tile t the older
// value (write-to-read causality, the PTX memory model): the emulator gives it, and the output is
// wrong.
// EXPECTED: fail as stale-read where n spans three tiles or more.
#define TILE_ITEMS (BLOCK_SIZE * ITEMS_PER_THREAD)

__device__ unsigned int bits_of(scan_t value) { unsigned int b; memcpy(&b, &value, sizeof b); return b; }
__device__ scan_t value_of(unsigned int b) { scan_t v; memcpy(&v, &b, sizeof v); return v; }

__global__ void scan_single_pass(const scan_t* in, scan_t* out, int n, unsigned long long* tile_status,
                                 unsigned int* tile_counter)
{
    extern __shared__ scan_t s[];
    __shared__ unsigned int ticket;
    __shared__ scan_t tile_prefix;
    int tid = threadIdx.x;
    if (tid == 0) ticket = atomicAdd(tile_counter, 1u);
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
    s[tid] = total;
    __syncthreads();
    for (int d = 1; d < BLOCK_SIZE; d *= 2) {
        scan_t v = s[tid];
        if (tid >= d) v = v + s[tid - d];
        __syncthreads();
        s[tid] = v;
        __syncthreads();
    }
    if (tid == 0) {
        volatile unsigned long long* st = tile_status;
        unsigned long long w;
        if (tile > 0)
            while ((st[tile - 1] >> 32) == 0) {}  // the predecessor has published
        st[tile] = (1ull << 32) | bits_of(s[BLOCK_SIZE - 1]);  // LINE:chain_store (no fence: only the aggregate travels, in the word)
        scan_t exclusive = 0;
        for (int j = tile - 1; j >= 0; --j) {
            w = st[j];  // LINE:chain_read (read once)
            exclusive = exclusive + value_of((unsigned int)w);
        }
        tile_prefix = exclusive;
    }
    __syncthreads();
    scan_t running = tile_prefix + (tid > 0 ? s[tid - 1] : (scan_t)0);
    for (int i = 0; i < ITEMS_PER_THREAD; ++i) {
        if (first + i < count) out[base + first + i] = running;
        running = running + x[i];
    }
}
