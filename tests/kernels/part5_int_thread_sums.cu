// BROKEN (a conversion, float32 only): the plain single-pass scan of part5_correct_serial_lookback.cu,
// but the thread totals are kept in a shared `int` array, whatever scan_t is: a float32 total loses
// its fraction when stored there. int32 passes every case and float32 fails every case with more
// than one element; the host compiler's -Wfloat-conversion names the line that converts, and the
// report shows it next to the wrong values (tests/backends/test_compiler_notes.py).

#define TILE_ITEMS (BLOCK_SIZE * ITEMS_PER_THREAD)

__device__ unsigned long long pack(unsigned int flag, scan_t value)
{
    unsigned int bits;
    memcpy(&bits, &value, sizeof bits);
    return ((unsigned long long)flag << 32) | bits;
}

__device__ scan_t unpack(unsigned long long word)
{
    unsigned int bits = (unsigned int)word;
    scan_t value;
    memcpy(&value, &bits, sizeof value);
    return value;
}

__global__ void scan_single_pass(const scan_t* in, scan_t* out, int n, unsigned long long* tile_status,
                                 unsigned int* tile_counter)
{
    extern __shared__ scan_t s[];  // the grader's tile (unused here)
    __shared__ int sums[BLOCK_SIZE];  // BUG: the thread totals in `int`: a float total loses its fraction
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
    sums[tid] = total;  // LINE:convert
    __syncthreads();
    for (int d = 1; d < BLOCK_SIZE; d *= 2) {
        int v = sums[tid];
        if (tid >= d)
            v = v + sums[tid - d];
        __syncthreads();
        sums[tid] = v;
        __syncthreads();
    }

    if (tid == 0) {
        scan_t aggregate = sums[BLOCK_SIZE - 1];
        scan_t exclusive = 0;
        volatile unsigned long long* status = tile_status;
        if (tile == 0) {
            status[0] = pack(2, aggregate);
        } else {
            status[tile] = pack(1, aggregate);
            for (int p = tile - 1;; --p) {
                unsigned long long w;
                do {
                    w = status[p];
                } while ((w >> 32) == 0);
                exclusive = exclusive + unpack(w);
                if ((w >> 32) == 2)
                    break;
            }
            status[tile] = pack(2, exclusive + aggregate);
        }
        tile_prefix = exclusive;
    }
    __syncthreads();

    scan_t running = tile_prefix + (tid > 0 ? sums[tid - 1] : 0);
    for (int i = 0; i < ITEMS_PER_THREAD; ++i) {
        if (first + i < count)
            out[base + first + i] = running;
        running = running + x[i];
    }
}
