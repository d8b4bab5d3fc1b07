// Kernels of tests/test_sampled_checks.py: the checks of a sample of a launch's blocks, and the
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
