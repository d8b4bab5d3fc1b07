// Part 5 (part5_single_pass). CORRECT: a chained scan that publishes each tile's aggregate in one
// 64-bit status word (flag | value) once its predecessor has published, then sums every
// predecessor's word, polling each until it is set. Tile t read tile t - 1's word after tile t - 1
// had read tile t - 2's, with no __threadfence() anywhere: the PTX memory model lets a GPU give tile
// t's read of tile t - 2's word its older value (write-to-read causality), and the emulator gives it
// (a stale-read warning); polled, that value only makes the thread wait. (Issue 50: the correct
// look-back that the write-to-read check had failed.)
// EXPECTED: pass at every n, with stale-read warnings where n spans three tiles or more.
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
            while (((w = st[j]) >> 32) == 0) {}  // polled: an older value only makes it wait
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
