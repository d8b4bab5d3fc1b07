// BROKEN (two causes): uses blockIdx.x as the tile index instead of a ticket (as part5_no_ticket.cu),
// and packs a status word from the value's bits held in an `int`, which the cast to 64 bits
// sign-extends: a negative aggregate or prefix sets every bit of the flag half, so a reader takes
// it for an aggregate (flag neither 0 nor 2), adds it and looks further back, adding the prefixes
// before it too. Cases whose prefixes go negative get wrong values: int32, and float32 exact (its
// inputs are quarters in [-4, 4]); a float32 fractional case (inputs in [0, 1)) would be right but
// for the ticket. Every case lists the ticket first (a broken contract), then the wrong values
// (tests/grading/test_findings.py).

#define TILE_ITEMS (BLOCK_SIZE * ITEMS_PER_THREAD)

__device__ unsigned long long pack(unsigned int flag, scan_t value)
{
    int bits;  // signed: (unsigned long long)bits sign-extends a negative value into the flag half
    memcpy(&bits, &value, sizeof bits);
    return ((unsigned long long)flag << 32) | (unsigned long long)bits;
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
    extern __shared__ scan_t s[];  // only the first BLOCK_SIZE elements are used
    __shared__ scan_t tile_prefix;
    int tid = threadIdx.x;

    int tile = blockIdx.x;  // assumes blocks start in blockIdx order
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
        volatile unsigned long long* status = tile_status;
        if (tile == 0) {
            status[0] = pack(2, aggregate);
        } else {
            status[tile] = pack(1, aggregate);
            for (int p = tile - 1; p >= 0; --p) {
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

    scan_t running = tile_prefix + (tid > 0 ? s[tid - 1] : (scan_t)0);
    for (int i = 0; i < ITEMS_PER_THREAD; ++i) {
        if (first + i < count)
            out[base + first + i] = running;
        running = running + x[i];
    }
}
