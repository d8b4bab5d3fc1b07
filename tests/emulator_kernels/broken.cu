// One kernel per defect, found by the checks (EmulatorBackend(checks=True)). Signature (int* out, int n).
// The tests find lines by the LINE: markers.

// Hillis-Steele in place with one barrier a step: a thread reads tile[t - d] while its owner writes it.
__global__ void race_raw(int* out, int n) {
    __shared__ int tile[256];
    const int t = threadIdx.x;
    tile[t] = t;
    __syncthreads();
    for (int d = 1; d < 256; d <<= 1) {
        if (t >= d) tile[t] += tile[t - d];  // LINE:raw
        __syncthreads();
    }
    out[t] = tile[t];
}

// Reverses in place without a barrier between the reads and the writes.
__global__ void race_war(int* out, int n) {
    __shared__ int s[64];
    const int t = threadIdx.x;
    s[t] = t;
    __syncthreads();
    int v = s[63 - t];  // LINE:war_read
    s[t] = v;           // LINE:war_write
    __syncthreads();
    out[t] = s[t];
}

// Every thread writes the same word.
__global__ void race_waw(int* out, int n) {
    __shared__ int last;
    last = threadIdx.x;  // LINE:waw
    __syncthreads();
    out[threadIdx.x] = last;
}

// Legacy warp-synchronous reduction: volatile, no __syncwarp (a race since Volta).
__global__ void warp_synchronous(int* out, int n) {
    __shared__ int s[64];
    const int t = threadIdx.x;
    s[t] = 1;
    __syncthreads();
    if (t < 32) {
        volatile int* v = s;
        v[t] += v[t + 16];  // LINE:legacy
        v[t] += v[t + 8];
        v[t] += v[t + 4];
        v[t] += v[t + 2];
        v[t] += v[t + 1];
    }
    if (t == 0) out[0] = s[0];
}

// The same reduction made correct with __syncwarp between the steps.
__global__ void warp_synchronous_fixed(int* out, int n) {
    __shared__ int s[64];
    const int t = threadIdx.x;
    s[t] = 1;
    __syncthreads();
    if (t < 32) {
        int v = s[t] + s[t + 32];
        for (int d = 16; d > 0; d >>= 1) {
            s[t] = v;
            __syncwarp();
            v += s[t + d < 32 ? t + d : t] * (t + d < 32);
            __syncwarp();
        }
        if (t == 0) out[0] = v;
    }
}

__global__ void oob_shared(int* out, int n) {
    __shared__ int s[32];
    s[threadIdx.x] = 1;  // LINE:oob_shared  (launched with 33 threads)
    __syncthreads();
    out[threadIdx.x] = s[threadIdx.x % 32];
}

__global__ void oob_global(int* out, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    out[i] = i;  // LINE:oob_global  (no i < n test)
}

__global__ void misaligned(int* out, int n) {
    char* bytes = (char*)out;
    if (threadIdx.x == 3) *(int*)(bytes + 2) = n;  // LINE:misaligned
}

__global__ void uninitialized(int* out, int n) {
    __shared__ int s[64];
    if (threadIdx.x < 32) s[threadIdx.x] = 1;
    __syncthreads();
    out[threadIdx.x] = s[threadIdx.x];  // LINE:uninit
}

__global__ void divergent_barrier(int* out, int n) {
    __shared__ int s[64];
    s[threadIdx.x] = 1;
    if (threadIdx.x < 32) {
        __syncthreads();  // LINE:bar_a
    } else {
        __syncthreads();  // LINE:bar_b
    }
    out[threadIdx.x] = s[63 - threadIdx.x];
}

__global__ void exit_before_barrier(int* out, int n) {
    __shared__ int s[64];
    if ((int)threadIdx.x >= n) return;  // LINE:exit_return
    s[threadIdx.x] = 1;
    __syncthreads();  // LINE:exit_bar
    out[threadIdx.x] = s[n - 1 - threadIdx.x];
}

__global__ void shuffle_outside_mask(int* out, int n) {
    int v = __shfl_sync(0x0000ffffu, (int)threadIdx.x, 0);  // LINE:mask  (lanes 16-31 call it too)
    out[threadIdx.x] = v;
}

__global__ void shuffle_half_missing(int* out, int n) {
    int v = 0;
    if (threadIdx.x < 16) v = __shfl_sync(0xffffffffu, (int)threadIdx.x, 0);  // LINE:half
    out[threadIdx.x] = v;
}

__global__ void spin_forever(int* out, int n) {
    __shared__ int flag;
    if (threadIdx.x == 0) flag = 0;
    __syncthreads();
    volatile int* f = &flag;
    while (*f == 0) {  // LINE:deadlock
    }
    out[threadIdx.x] = 1;
}

// Block b reads the last element block b - 1 wrote, in the same launch, with no synchronisation.
__global__ void global_race(int* out, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    out[i] = 1;  // LINE:g_write
    if (threadIdx.x == 0 && blockIdx.x > 0) out[i] += out[i - 1];  // LINE:g_read
}

// Correct: in-place scan tricks with two barriers a step, double buffering, atomics on shared memory.
__global__ void clean_in_place(int* out, int n) {
    __shared__ int tile[256];
    __shared__ int buf[2][256];
    __shared__ unsigned count;
    const int t = threadIdx.x;
    if (t == 0) count = 0;
    tile[t] = t;
    buf[0][t] = t;
    __syncthreads();
    for (int d = 1; d < 256; d <<= 1) {
        int v = t >= d ? tile[t - d] : 0;
        __syncthreads();
        tile[t] += v;
        __syncthreads();
    }
    int src = 0;
    for (int d = 1; d < 256; d <<= 1) {
        buf[1 - src][t] = buf[src][t] + (t >= d ? buf[src][t - d] : 0);
        src = 1 - src;
        __syncthreads();
    }
    atomicAdd(&count, 1u);
    __syncthreads();
    out[t] = tile[t] - buf[src][t] + (int)count;
}

// Block b publishes a value for block b + 1 with a fence and a flag, but the value is written by
// its last thread and thread 0 publishes without a __syncthreads() first: the flag does not cover
// the value. (One flag per block after the grid's values: out has gridDim.x * (blockDim.x + 1)
// elements.)
__global__ void flag_without_barrier(int* out, int n) {
    volatile int* flag = out + gridDim.x * blockDim.x;
    const int b = blockIdx.x;
    if (threadIdx.x == blockDim.x - 1) out[b] = b + 1;  // LINE:fb_write
    if (threadIdx.x == 0) {
        __threadfence();
        flag[b] = 1;
        if (b > 0) {
            while (flag[b - 1] == 0) {
            }
            __threadfence();
            out[gridDim.x + b] = out[b - 1];  // LINE:fb_read
        }
    }
}
