// Kernels that fail on purpose. The tests find lines by the LINE: markers.
#include <assert.h>

__global__ void assert_kernel(int* out, int n) {
    out[threadIdx.x] = 1;
    assert(threadIdx.x != 5 || blockIdx.x < n);  // LINE:assert
}

__global__ void trap_kernel(int* out, int n) {
    if (blockIdx.x == 2 && threadIdx.x == 3) __trap();  // LINE:trap
    out[0] = n;
}

__global__ void too_much_static_shared(int* out, int n) {
    __shared__ int big[13 * 1024];  // 52 KiB  LINE:big
    big[threadIdx.x] = n;
    out[threadIdx.x] = big[threadIdx.x];
}

__global__ void static_plus_dynamic(int* out, int n) {
    extern __shared__ int dyn[];
    __shared__ int fixed[9 * 1024];  // 36 KiB: fits alone, not with 16 KiB of dynamic memory
    fixed[threadIdx.x] = n;
    dyn[threadIdx.x] = n;
    out[threadIdx.x] = fixed[threadIdx.x] + dyn[threadIdx.x];
}

__global__ void warp_shuffle(int* out, int n) {
    int v = __shfl_up(n, 1);  // LINE:shfl  (pre-Volta, without a mask)
    out[threadIdx.x] = v;
}

__global__ void fail_late_block(int* out, int n) {
    // every block from n on fails; the lowest failing block is reported
    if (threadIdx.x == 7) assert(blockIdx.x < n);
    out[blockIdx.x * blockDim.x + threadIdx.x] = 1;
}

__device__ int recurse(int depth) {
    volatile int local[1024];  // 4 KiB a frame: 64 KiB of stack is gone at depth 16
    local[depth % 1024] = depth;
    return depth == 0 ? 0 : recurse(depth - 1) + local[depth % 1024];
}

// out: which fault; n: its parameter
__global__ void fault(int* out, int n) {
    extern __shared__ int dyn[];
    if (blockIdx.x != 1 || threadIdx.x != 2) return;
    if (out[0] == 0) out[0] = *(volatile int*)(size_t)n;           // null / wild pointer
    if (out[0] == 1) out[0] = recurse(n);                          // stack overflow
    if (out[0] == 2) out[0] = 100 / (n - 5);                        // division by zero at n == 5
    if (out[0] == 3) ((volatile int*)dyn)[n] = 1;                  // past the shared arena
}
