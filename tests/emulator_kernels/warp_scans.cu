// Correct kernels built on warp intrinsics. Launched with the signature (const int* in, int* out, int n).

// Inclusive scan of one block (up to 1024 threads): shuffle scan per warp, warp sums in shared memory.
template <typename T>
__device__ T warp_inclusive(T v) {
    const int lane = threadIdx.x % 32;
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
        T up = __shfl_up_sync(0xffffffffu, v, d);
        if (lane >= d) v += up;
    }
    return v;
}

__global__ void shfl_block_scan(const int* in, int* out, int n) {
    __shared__ int warp_sums[32];
    const int t = threadIdx.x, lane = t % 32, warp = t / 32;
    int v = t < n ? in[t] : 0;
    v = warp_inclusive(v);
    if (lane == 31) warp_sums[warp] = v;
    __syncthreads();
    if (warp == 0) {
        int s = lane < (int)(blockDim.x / 32) ? warp_sums[lane] : 0;
        s = warp_inclusive(s);
        warp_sums[lane] = s;
    }
    __syncthreads();
    if (warp > 0) v += warp_sums[warp - 1];
    if (t < n) out[t] = v;
}

// Reductions with __shfl_xor_sync / __shfl_down_sync / __ballot_sync / __any_sync / __all_sync / __syncwarp.
__global__ void warp_votes(const int* in, int* out, int n) {
    const unsigned active = __activemask();  // converged: every lane
    const int t = threadIdx.x, lane = t % 32;
    int v = in[t];
    int x = v;
    for (int m = 16; m > 0; m >>= 1) x += __shfl_xor_sync(0xffffffffu, x, m);
    int y = v;
    for (int d = 16; d > 0; d >>= 1) y += __shfl_down_sync(0xffffffffu, y, d);
    unsigned odd = __ballot_sync(0xffffffffu, v & 1);
    int any = __any_sync(0xffffffffu, v > n);
    int all = __all_sync(0xffffffffu, v >= 0);
    int first = __shfl_sync(0xffffffffu, v, 0);
    __syncwarp();
    unsigned half = 0;
    if (lane < 16) half = __ballot_sync(0x0000ffffu, 1);  // a partial mask: lanes 0-15 only
    if (lane == 0) {
        out[t / 32 * 8 + 0] = x;
        out[t / 32 * 8 + 1] = y;
        out[t / 32 * 8 + 2] = (int)odd;
        out[t / 32 * 8 + 3] = any;
        out[t / 32 * 8 + 4] = all;
        out[t / 32 * 8 + 5] = first;
        out[t / 32 * 8 + 6] = (int)half;
        out[t / 32 * 8 + 7] = __popc(active);
    }
}

// Device printf, captured per launch.
__global__ void say_hello(const int* in, int* out, int n) {
    if (threadIdx.x < n) printf("hello from thread %d of block %d\n", (int)threadIdx.x, (int)blockIdx.x);
}

// Many lines of printf: the capture is capped.
__global__ void shout(const int* in, int* out, int n) {
    for (int i = 0; i < n; ++i) printf("thread %d line %d: a rather long line of device output\n", (int)threadIdx.x, i);
}
