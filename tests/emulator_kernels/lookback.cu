// Single-pass scans with decoupled look-back (Merrill & Garland): each block publishes its tile's
// aggregate, then its inclusive prefix, and looks back over its predecessors' published states.
// Signature: (const int* in, int* out, unsigned long long* state, int n); state zeroed, state[0]
// of the array past the tiles is the tile ticket counter.
#define TILE 256
#define FLAG_A 1ull  // aggregate available
#define FLAG_P 2ull  // inclusive prefix available

__device__ unsigned long long pack(unsigned flag, int value) {
    return (unsigned long long)flag << 32 | (unsigned)value;
}

template <bool TICKET>
__device__ void lookback_scan(const int* in, int* out, unsigned long long* state, int n) {
    __shared__ int tile[TILE];
    __shared__ int tile_id;
    __shared__ int exclusive;
    const int t = threadIdx.x;
    const int tiles = (n + TILE - 1) / TILE;
    if (t == 0) tile_id = TICKET ? (int)atomicAdd((unsigned long long*)&state[tiles], 1ull) : (int)blockIdx.x;
    __syncthreads();
    const int id = tile_id;
    const int i = id * TILE + t;
    tile[t] = i < n ? in[i] : 0;
    __syncthreads();
    for (int d = 1; d < TILE; d <<= 1) {  // Hillis-Steele inclusive scan of the tile
        int v = t >= d ? tile[t - d] : 0;
        __syncthreads();
        tile[t] += v;
        __syncthreads();
    }
    if (t == 0) {
        const int aggregate = tile[TILE - 1];
        volatile unsigned long long* st = state;
        if (id == 0) {
            st[0] = pack(FLAG_P, aggregate);
            exclusive = 0;
        } else {
            st[id] = pack(FLAG_A, aggregate);
            __threadfence();
            int sum = 0;
            for (int j = id - 1; j >= 0;) {
                unsigned long long s = st[j];
                unsigned flag = (unsigned)(s >> 32);
                if (flag == 0) { __nanosleep(20); continue; }  // not published yet: wait
                sum += (int)(unsigned)s;
                if (flag == FLAG_P) break;
                --j;  // only an aggregate: keep looking back
            }
            __threadfence();
            st[id] = pack(FLAG_P, sum + aggregate);
            exclusive = sum;
        }
    }
    __syncthreads();
    if (i < n) out[i] = tile[t] + exclusive;
}

__global__ void lookback_ticket(const int* in, int* out, unsigned long long* state, int n) {
    lookback_scan<true>(in, out, state, n);
}

__global__ void lookback_blockidx(const int* in, int* out, unsigned long long* state, int n) {
    lookback_scan<false>(in, out, state, n);
}

// Broken on purpose: waits for a successor's state that is never published.
__global__ void lookback_wrong_way(const int* in, int* out, unsigned long long* state, int n) {
    volatile unsigned long long* st = state;
    if (threadIdx.x == 0) {
        while (st[blockIdx.x + 1] == 0) {  // LINE:spin
        }
    }
    __syncthreads();
    out[blockIdx.x] = 1;
}
