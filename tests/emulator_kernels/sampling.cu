// Kernels of tests/grading/test_sampled_checks.py: the checks of a sample of a launch's blocks, and the
// random order's switches at memory accesses. Each takes (out, n).

// Every block marks its own element: out[b] = b + 1 (so an element left 0 is a block that did not run).
__global__ void mark_blocks(int* out, int n) {
    if (threadIdx.x == 0 && (int)blockIdx.x < n)
        out[blockIdx.x] = blockIdx.x + 1;
}

// Block n alone has a race: all its threads store to one shared word with nothing between them.
// Every block marks its element, as mark_blocks does.
__global__ void race_in_block(int* out, int n) {
    __shared__ int word;
    if (threadIdx.x == 0)
        word = 0;
    __syncthreads();
    if ((int)blockIdx.x == n)
        word = threadIdx.x;  // LINE:race_store
    __syncthreads();
    if (threadIdx.x == 0)
        out[blockIdx.x] = blockIdx.x + 1 + word * 0;
}

// Every thread adds 1 to one shared word with a plain, unsynchronised `+=`; out[b] = the block's
// count: blockDim.x where no update is lost.
__global__ void shared_count(int* out, int n) {
    __shared__ int count;
    if (threadIdx.x == 0)
        count = 0;
    __syncthreads();
    count += 1;  // LINE:plus_one
    __syncthreads();
    if (threadIdx.x == 0 && (int)blockIdx.x < n)
        out[blockIdx.x] = count;
}

// Thread 0 stores to the block's element n times, then every thread of the block stores to one
// shared word with nothing between them (a race); out[b] = n. In a launch of sampled blocks only, the race is after
// the block's checked accesses (SG_SAMPLED_BLOCK_CHECKS) where n is larger than them.
__global__ void race_after_work(int* out, int n) {
    __shared__ int word;
    if (threadIdx.x == 0) {
        for (int i = 0; i < n; ++i)
            out[blockIdx.x] = i;
        word = 0;
    }
    __syncthreads();
    word = threadIdx.x;  // LINE:late_race
    __syncthreads();
    if (threadIdx.x == 0)
        out[blockIdx.x] = n + word * 0;
}
