// Kernels of tests/backends/test_vclock.py: what a kernel can read to tell a checked run from an unchecked
// one. Each takes (out, n).

// Each thread times n loads of its own two words of out[] with clock64() and clock(), then
// stores what it measured: out[2 * gid] = the clock64() difference, out[2 * gid + 1] = the clock()
// difference. The virtual clock gives the same numbers checked or not, in any thread order.
__global__ void time_loads(int* out, int n) {
    const int gid = blockIdx.x * blockDim.x + threadIdx.x;
    volatile int sink = 0;
    long long t0 = clock64();
    clock_t c0 = clock();
    for (int i = 0; i < n; ++i)
        sink = sink + out[2 * gid + (i & 1)];
    long long t1 = clock64();
    clock_t c1 = clock();
    out[2 * gid] = (int)(t1 - t0);
    out[2 * gid + 1] = (int)(c1 - c0);
}

// Counts its own launches in a __device__ variable: out[b] = the launch number block b saw (1 for
// the first launch since the module's globals were fresh). Block 0's thread 0 counts, after every
// block of the launch read the number (the last block to finish, by a ticket, counts).
__device__ int sg_test_launches;
__device__ unsigned sg_test_done;

__global__ void count_launches(int* out, int n) {
    const int seen = *(volatile int*)&sg_test_launches;
    if (threadIdx.x == 0) {
        out[blockIdx.x] = seen + 1;
        if (atomicAdd(&sg_test_done, 1u) == gridDim.x - 1) {
            sg_test_done = 0;
            atomicAdd(&sg_test_launches, 1);
        }
    }
}
