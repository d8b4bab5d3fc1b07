// Kernels with known shared-memory bank conflicts and global access patterns, for the emulator's
// memory-access profile (tests/backends/test_profile.py). Launch: one block of 32 threads (one warp) unless
// the test says otherwise. Each access the test counts is on its own line, marked LINE:<name>.

// Lane t stores to and loads s[t * stride]: for a power-of-two stride, a min(32, stride)-way bank
// conflict (stride 1: none); for an odd stride, none.
__global__ void strided_shared(int* out, int stride)
{
    __shared__ int s[32 * 32];
    int t = threadIdx.x;
    s[t * stride] = t;                   // LINE:strided_store
    __syncthreads();
    out[t] = s[t * stride];              // LINE:strided_load
}

// Every lane reads the same word (broadcast), then lanes read two words of one bank (t & 1) * 32.
__global__ void broadcast(int* out, int n)
{
    __shared__ int s[64];
    int t = threadIdx.x;
    if (t < 2) s[t * 32] = n + t;        // LINE:two_lanes_store
    __syncthreads();
    int a = s[0];                        // LINE:broadcast_load
    int b = s[(t & 1) * 32];             // LINE:two_words_load
    out[t] = a + b;
}

// 8-byte accesses: lane t touches s[t * stride] (two 4-byte words, two banks), in half-warps.
__global__ void shared64(int* out, int stride)
{
    __shared__ long long s[32 * 16];
    int t = threadIdx.x;
    s[t * stride] = t;                   // LINE:wide_store
    __syncthreads();
    out[t] = (int)s[t * stride];         // LINE:wide_load
}

// Global loads of in[t * stride] (4 bytes a lane), one store of out[t].
__global__ void global_stride(const int* in, int* out, int stride)
{
    int t = threadIdx.x;
    int v = in[t * stride];              // LINE:global_load
    out[t] = v;                          // LINE:global_store
}

// One store executed `iterations` times by every lane with no barrier between: iteration i is
// the i-th request of the warp (stride 2^i: a 1-, 2-, 4-way... conflict), although lane 0 runs
// all its iterations before lane 1 starts its first.
__global__ void repeated(int* out, int iterations)
{
    __shared__ int s[32 * 32];
    int t = threadIdx.x;
    for (int i = 0; i < iterations; ++i)
        s[t << i] = i;                   // LINE:repeated_store
    __syncthreads();
    out[t] = s[t];
}

// Lane 0 alone stores `iterations` times with no barrier (a sequential loop in one thread): one
// single-lane request per iteration, however long the loop (the profile bounds its memory).
__global__ void one_lane_loop(int* out, int iterations)
{
    __shared__ int s[1024];
    int t = threadIdx.x;
    if (t == 0)
        for (int i = 0; i < iterations; ++i)
            s[i & 1023] = i;             // LINE:one_lane_store
    __syncthreads();
    out[t] = s[t];
}

// The steps of a thread (its memory operations) for the span: lane 0 makes `k` atomics, lane 1
// `k` volatile loads and `k` volatile stores of a __device__ variable, every lane `k` stores to a
// local array of its own stack (no step: registers on a GPU) and passes `k` barriers.
__device__ int g_steps;

__global__ void steps(int* out, int k)
{
    volatile int local[4];
    int t = threadIdx.x;
    for (int i = 0; i < k; ++i) {
        local[i & 3] = i;
        if (t == 0)
            atomicAdd(&out[0], 1);
        if (t == 1) {
            volatile int* g = &g_steps;
            *g = *g + 1;
        }
        __syncthreads();
    }
    (void)local[0];
}
