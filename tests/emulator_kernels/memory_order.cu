// Message passing between blocks (the PTX memory model; Merrill & Garland 2016, section 4): block b
// stores a value and then a flag for block b + 1, which waits for the flag and reads the value.
// out: values[gridDim.x], flags[gridDim.x], results[gridDim.x]. One thread a block does it (thread
// 0), but in `barrier_then_fence` the value is the last thread's.

#define VALUES(out) (out)
#define FLAGS(out) ((volatile int*)(out) + gridDim.x)
#define RESULTS(out) ((out) + 2 * gridDim.x)

// Neither side fences: the flag may become visible first, and the value read is then the old one.
extern "C" __global__ void no_fence(int* out, int n) {
    const int b = blockIdx.x;
    if (threadIdx.x != 0) return;
    if (b > 0) {
        while (FLAGS(out)[b - 1] == 0) {  // LINE:nf_flag_load
        }
        RESULTS(out)[b] = VALUES(out)[b - 1];  // LINE:nf_value_load
    }
    VALUES(out)[b] = b + 1;  // LINE:nf_value_store
    FLAGS(out)[b] = 1;       // LINE:nf_flag_store
}

// The writer fences; the reader does not: its load of the value may be served before that of the flag.
extern "C" __global__ void reader_unfenced(int* out, int n) {
    const int b = blockIdx.x;
    if (threadIdx.x != 0) return;
    if (b > 0) {
        while (FLAGS(out)[b - 1] == 0) {  // LINE:ru_flag_load
        }
        RESULTS(out)[b] = VALUES(out)[b - 1];  // LINE:ru_value_load
    }
    VALUES(out)[b] = b + 1;
    __threadfence();
    FLAGS(out)[b] = 1;
}

// Correct: a fence between the stores and one between the loads.
extern "C" __global__ void fenced(int* out, int n) {
    const int b = blockIdx.x;
    if (threadIdx.x != 0) return;
    if (b > 0) {
        while (FLAGS(out)[b - 1] == 0) {
        }
        __threadfence();
        RESULTS(out)[b] = VALUES(out)[b - 1];
    }
    VALUES(out)[b] = b + 1;
    __threadfence();
    FLAGS(out)[b] = 1;
}

// Correct: a store with release order and a load with acquire order (GCC's builtins; CUDA's
// cuda::atomic_ref compiles to the same orders).
extern "C" __global__ void release_acquire(int* out, int n) {
    const int b = blockIdx.x;
    int* flags = out + gridDim.x;
    if (threadIdx.x != 0) return;
    if (b > 0) {
        while (__atomic_load_n(&flags[b - 1], __ATOMIC_ACQUIRE) == 0) {
        }
        RESULTS(out)[b] = VALUES(out)[b - 1];
    }
    VALUES(out)[b] = b + 1;
    __atomic_store_n(&flags[b], 1, __ATOMIC_RELEASE);
}

// Relaxed atomics order nothing: as `no_fence`.
extern "C" __global__ void relaxed_atomics(int* out, int n) {
    const int b = blockIdx.x;
    int* flags = out + gridDim.x;
    if (threadIdx.x != 0) return;
    if (b > 0) {
        while (__atomic_load_n(&flags[b - 1], __ATOMIC_RELAXED) == 0) {
        }
        RESULTS(out)[b] = VALUES(out)[b - 1];  // LINE:ra_value_load
    }
    VALUES(out)[b] = b + 1;
    __atomic_store_n(&flags[b], 1, __ATOMIC_RELAXED);
}

// Correct: the last thread stores the value, a barrier, then thread 0 fences and stores the flag
// (the fence is cumulative: it orders what the barrier made visible to thread 0).
extern "C" __global__ void barrier_then_fence(int* out, int n) {
    const int b = blockIdx.x;
    if (threadIdx.x == blockDim.x - 1) VALUES(out)[b] = b + 1;
    __syncthreads();
    if (threadIdx.x != 0) return;
    if (b > 0) {
        while (FLAGS(out)[b - 1] == 0) {
        }
        __threadfence();
        RESULTS(out)[b] = VALUES(out)[b - 1];
    }
    __threadfence();
    FLAGS(out)[b] = 1;
}

// The writer publishes right (value, fence, flag by atomicExch); the reader polls the flag with a
// CUDA atomic (relaxed: atomicAdd(flag, 0)) and reads the value with a plain load, with no fence
// between: the value's load may be served before the flag's (issue 33).
extern "C" __global__ void atomic_poll_unfenced(int* out, int n) {
    const int b = blockIdx.x;
    int* flags = out + gridDim.x;
    if (threadIdx.x != 0) return;
    if (b > 0) {
        while (atomicAdd(&flags[b - 1], 0) == 0) {  // LINE:ap_flag_load
        }
        RESULTS(out)[b] = VALUES(out)[b - 1];  // LINE:ap_value_load
    }
    VALUES(out)[b] = b + 1;
    __threadfence();
    atomicExch(&flags[b], 1);
}

// Correct: as `atomic_poll_unfenced`, with a __threadfence() between the flag's read and the value's.
extern "C" __global__ void atomic_poll_fenced(int* out, int n) {
    const int b = blockIdx.x;
    int* flags = out + gridDim.x;
    if (threadIdx.x != 0) return;
    if (b > 0) {
        while (atomicCAS(&flags[b - 1], 1, 1) == 0) {
        }
        __threadfence();
        RESULTS(out)[b] = VALUES(out)[b - 1];
    }
    VALUES(out)[b] = b + 1;
    __threadfence();
    atomicExch(&flags[b], 1);
}
