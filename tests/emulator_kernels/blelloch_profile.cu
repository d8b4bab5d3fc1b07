// Blelloch (work-efficient) exclusive scan of 64 elements by one warp (32 threads), unpadded and
// padded (index i stored at i + (i >> 5)), for the emulator's memory-access profile
// (tests/backends/test_profile.py). Every shared access is a plain load or store into a local, so each
// level is exactly: up-sweep 2 loads + 1 store, down-sweep 2 loads + 2 stores.

#define PAD(i) ((i) + ((i) >> 5))

template <bool Padded>
__device__ void scan64(const int* in, int* out, int n, int* s)
{
    int t = threadIdx.x;
    int a = Padded ? PAD(t) : t;
    int b = Padded ? PAD(t + 32) : t + 32;
    s[a] = t < n ? in[t] : 0;
    s[b] = t + 32 < n ? in[t + 32] : 0;
    int offset = 1;
    for (int d = 32; d > 0; d >>= 1) {
        __syncthreads();
        if (t < d) {
            int li = offset * (2 * t + 1) - 1, ri = offset * (2 * t + 2) - 1;
            if (Padded) li = PAD(li), ri = PAD(ri);
            int l = s[li];
            int r = s[ri];
            s[ri] = l + r;
        }
        offset <<= 1;
    }
    __syncthreads();
    if (t == 0) s[Padded ? PAD(63) : 63] = 0;
    for (int d = 1; d <= 32; d <<= 1) {
        offset >>= 1;
        __syncthreads();
        if (t < d) {
            int li = offset * (2 * t + 1) - 1, ri = offset * (2 * t + 2) - 1;
            if (Padded) li = PAD(li), ri = PAD(ri);
            int l = s[li];
            int r = s[ri];
            s[li] = r;
            s[ri] = l + r;
        }
    }
    __syncthreads();
    if (t < n) out[t] = s[a];
    if (t + 32 < n) out[t + 32] = s[b];
}

__global__ void blelloch_unpadded(const int* in, int* out, int n)
{
    __shared__ int s[64];
    scan64<false>(in, out, n, s);
}

__global__ void blelloch_padded(const int* in, int* out, int n)
{
    __shared__ int s[66];
    scan64<true>(in, out, n, s);
}
