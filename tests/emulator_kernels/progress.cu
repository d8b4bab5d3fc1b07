// Forward progress (tests/backends/test_emulator_progress.py): kernels that run many barriers and end, loops
// through barriers that never end, and waits for another block that another block ends.
// Signature: (const int* in, int* out, int* flag, int n); `rounds` is n's companion argument.

// A right Hillis-Steele scan of one block (in[0..blockDim.x)), then `rounds` more barriers whose
// progress is kept in a register only: it ends, whatever `rounds` is.
__global__ void scan_then_rounds(const int* in, int* out, int* flag, int rounds) {
    __shared__ int s[1024];
    const int t = threadIdx.x;
    s[t] = in[t];
    __syncthreads();
    for (int d = 1; d < (int)blockDim.x; d *= 2) {
        int v = t >= d ? s[t - d] : 0;
        __syncthreads();
        s[t] += v;
        __syncthreads();
    }
    int acc = 0;
    for (int r = 0; r < rounds; ++r) {
        acc += r & 1;
        __syncthreads();  // LINE:rounds
    }
    out[t] = s[t] + acc - rounds / 2;  // acc == rounds / 2: the scan itself
}

// An endless loop through two barriers: nothing in it changes x, so the condition never fails.
__global__ void endless_two_barriers(const int* in, int* out, int* flag, int n) {
    __shared__ int s[32];
    const int t = threadIdx.x;
    if (t < 32) s[t] = n;
    int x = 0;
    while (x != n + 1) {
        __syncthreads();  // LINE:loop_a
        x = s[0];
        __syncthreads();  // LINE:loop_b
    }
    out[t] = x;
}

// Block 0 waits, a barrier each round, for a flag that the launch's last block sets after `n`
// rounds of its own (each with a fence, so that the blocks take turns): a right wait, across
// blocks. Its block state repeats while it waits; the flag's read is what ends the wait.
__global__ void wait_for_last_block(const int* in, int* out, int* flag, int n) {
    __shared__ int seen;
    const int t = threadIdx.x;
    volatile int* f = flag;
    if (blockIdx.x == 0) {
        for (;;) {
            if (t == 0) seen = *f;
            __syncthreads();  // LINE:wait
            if (seen) break;
            __syncthreads();
        }
        out[t] = seen;
    } else if (blockIdx.x == gridDim.x - 1) {
        int acc = 0;
        for (int r = 0; r < n; ++r) {
            acc += r;
            __threadfence();
            __syncthreads();
        }
        if (t == 0) *f = 1 + (acc & 0);
        out[blockIdx.x * blockDim.x + t] = 1;
    } else {
        out[blockIdx.x * blockDim.x + t] = 1;
    }
}

// One block waits, a barrier each round, for a flag in global memory that nothing sets: once it
// is the launch's only block, nothing can set it, and it never ends.
__global__ void wait_forever(const int* in, int* out, int* flag, int n) {
    __shared__ int seen;
    const int t = threadIdx.x;
    volatile int* f = flag;
    for (;;) {
        if (t == 0) seen = *f;
        __syncthreads();  // LINE:forever
        if (seen) break;
        __syncthreads();
    }
    out[blockIdx.x * blockDim.x + t] = seen;
}

// Every thread polls a flag that nothing sets, but only `n` times, counting in a register: each
// poll reads the same value at the same place, and still the kernel ends.
__global__ void bounded_poll(const int* in, int* out, int* flag, int n) {
    volatile int* f = flag;
    int i = 0;
    while (i < n && *f == 0)
        ++i;
    out[blockIdx.x * blockDim.x + threadIdx.x] = i;
}
