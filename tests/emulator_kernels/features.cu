// Dialect features beyond the scans: barrier predicates, shared-memory forms, templates, poison.

template <int N>
__device__ int sum_of_first(int value) {
    // one slot per template instantiation: N = 4 and N = 64 must not share storage
    __shared__ int slots[N];
    if (threadIdx.x < N) slots[threadIdx.x] = value;
    __syncthreads();
    int s = 0;
    for (int i = 0; i < N; ++i) s += slots[i];
    __syncthreads();
    return s;
}

// out[0..2]: __syncthreads_count/and/or of (threadIdx.x % 3 == 0); out[3], out[4]: template sums
__global__ void barrier_predicates(int* out, int n) {
    const int p = threadIdx.x % 3 == 0;
    const int c = __syncthreads_count(p);
    const int a = __syncthreads_and(p);
    const int o = __syncthreads_or(p);
    const int all_one = __syncthreads_and(1);
    const int s4 = sum_of_first<4>(1);
    const int s64 = sum_of_first<64>(2);
    if (threadIdx.x == 0) {
        out[0] = c; out[1] = a; out[2] = o; out[3] = s4; out[4] = s64; out[5] = all_one;
    }
}

// Several declarators, volatile, __align__, 2-D arrays, a shared pointer, sizeof.
__global__ void shared_forms(int* out, int n) {
    volatile __shared__ int a[8], b, *p;
    __shared__ __align__(64) short m[4][8];
    __attribute__((aligned(32))) __shared__ unsigned long long wide[2];
    const int t = threadIdx.x;
    if (t < 8) a[t] = t * t;
    if (t < 32) m[t / 8][t % 8] = (short)(t + 100);
    if (t == 0) { b = 42; p = &a[3]; wide[0] = 1ull << 40; wide[1] = 7; }
    __syncthreads();
    if (t == 0) {
        out[0] = *p;
        out[1] = b;
        out[2] = m[3][7];
        out[3] = (int)sizeof(m);
        out[4] = (int)(((unsigned long long)(size_t)&m[0][0]) % 64);
        out[5] = (int)(((unsigned long long)(size_t)&wide[0]) % 32);
        out[6] = (int)(wide[0] >> 40) + (int)wide[1];
        out[7] = min(n, 5) + max(2u, 3u) + __popc(0xF0u) + __ffs(8) + __clz(1);
    }
}

// Reads shared memory nobody wrote: the arena is filled with 0xA5 bytes at block start.
__global__ void read_poison(int* out, int n) {
    __shared__ int never_written[4];
    extern __shared__ int dyn[];
    if (threadIdx.x == 0) { out[0] = never_written[n]; out[1] = dyn[n]; }
}

// __shared__ in a namespace (used qualified), in a member function, in a lambda, of a typedef'd type.
typedef int Tile[32];
namespace detail {
__shared__ Tile ns_tile;
struct Mirror {
    __device__ int twice_mirrored(int v) {
        __shared__ int scratch[64];
        scratch[threadIdx.x] = 2 * v;
        __syncthreads();
        return scratch[63 - threadIdx.x];
    }
};
}  // namespace detail

// with 64 threads: out[t] = 2 * (63 - t) + 1000 * (63 - t) + 7
__global__ void scopes(int* out, int n) {
    __shared__ Tile t;
    auto mirrored = [&](int i) {
        __shared__ float4 v[64];
        v[i].x = (float)i;
        __syncthreads();
        return (int)v[63 - i].x;
    };
    t[threadIdx.x % 32] = (int)threadIdx.x;
    if (threadIdx.x == 0) detail::ns_tile[3] = 7;
    __syncthreads();
    detail::Mirror m;
    out[threadIdx.x] = m.twice_mirrored(threadIdx.x) + 1000 * mirrored(threadIdx.x) + detail::ns_tile[3] + t[5] * 0;
}
