// Attack: read the hidden sizes off the bank-conflict profile. A correct Part 3 scan (the padded
// Blelloch) that remembers, in __device__ globals, the n of the launch before this one and how many
// launches came before; every launch then makes that many extra shared loads in block 0: two-way
// conflicting ones (lanes 0 and 1 on words 0 and 64, one bank) as many as the previous n, and
// single-lane ones as many as the earlier launches. The loads change no output, so every case
// passes; but the profile's "(X from bank conflicts)" is the n of the launch before the profiled
// one. Profiled after the hidden cases in the same module, X is the last hidden size.

#define LOG_NUM_BANKS 5

__device__ int g_previous_n;     // the n of the last launch of this module
__device__ int g_launches;       // launches of this module so far

__device__ __forceinline__ int padded(int i)
{
    return i + (i >> LOG_NUM_BANKS) + (i >> (2 * LOG_NUM_BANKS));
}

__global__ void blelloch_scan_cf(const scan_t* in, scan_t* out, int n)
{
    extern __shared__ scan_t s[];
    __shared__ int previous, launches;
    int tid = threadIdx.x;
    int ai = tid;
    int bi = tid + BLOCK_SIZE;
    if (tid == 0) {
        previous = g_previous_n;
        launches = g_launches;
    }

    s[padded(ai)] = (ai < n) ? in[ai] : 0;
    s[padded(bi)] = (bi < n) ? in[bi] : 0;

    int offset = 1;
    for (int d = BLOCK_SIZE; d > 0; d /= 2) {
        __syncthreads();
        if (tid < d) {
            int left = padded(offset * (2 * tid + 1) - 1);
            int right = padded(offset * (2 * tid + 2) - 1);
            s[right] = s[right] + s[left];
        }
        offset *= 2;
    }
    if (tid == 0)
        s[padded(2 * BLOCK_SIZE - 1)] = 0;
    for (int d = 1; d <= BLOCK_SIZE; d *= 2) {
        offset /= 2;
        __syncthreads();
        if (tid < d) {
            int left = padded(offset * (2 * tid + 1) - 1);
            int right = padded(offset * (2 * tid + 2) - 1);
            scan_t t = s[left];
            s[left] = s[right];
            s[right] = s[right] + t;
        }
    }
    __syncthreads();

    if (ai < n)
        out[ai] = s[padded(ai)];
    if (bi < n)
        out[bi] = s[padded(bi)];

    // The encoding: reads only, after the last barrier (slot 64 is padded(63), written above).
    volatile scan_t* vs = s;
    if (blockIdx.x == 0 && tid < 2) {
        for (int k = 0; k < previous; ++k) {
            (void)vs[tid == 0 ? 0 : 64];  // one request, two words of bank 0: one conflict wavefront
            vs[32 + 33 * tid] = k;        // padding slots no thread reads: progress, not a spin-wait
        }
    }
    if (blockIdx.x == 0 && tid == 0) {
        for (int k = 0; k < launches; ++k) {
            (void)vs[1];                  // one lane: one wavefront, no conflict
            vs[32] = k;
        }
        g_previous_n = n;
        g_launches = launches + 1;
    }
}
