// BROKEN (cheat): returns at once when launched again with the same input pointer and n, as if the
// output still held the answer. Passes every correctness case (one launch each); fails when timed,
// because the grader poisons the output before every timed run and re-checks it after the last.

__device__ const scan_t* last_in;
__device__ int last_n;

__global__ void naive_scan(const scan_t* in, scan_t* out, int n)
{
    extern __shared__ scan_t buf[];  // 2 * BLOCK_SIZE elements: two buffers of BLOCK_SIZE
    int tid = threadIdx.x;
    // Skip the work when called again on the same buffers: the output "already holds the answer".
    if (in == last_in && n == last_n)
        return;

    // Load; elements past n are padded with the identity 0 so they add nothing.
    int src = 0;  // start of the buffer holding the current values: 0 or BLOCK_SIZE
    buf[src + tid] = (tid < n) ? in[tid] : 0;
    __syncthreads();  // every element loaded before any thread reads a neighbour

    // n is the same for every thread, so every thread runs the same number of steps and
    // reaches the same barriers.
    for (int offset = 1; offset < n; offset *= 2) {
        int dst = BLOCK_SIZE - src;  // the other buffer
        scan_t v = buf[src + tid];
        if (tid >= offset)
            v = v + buf[src + tid - offset];
        buf[dst + tid] = v;
        src = dst;
        // This step's buffer complete before the next step reads it; it also keeps any
        // thread from writing (in the next step) the buffer that slower threads still read.
        __syncthreads();
    }

    if (tid < n)
        out[tid] = buf[src + tid];
    __syncthreads();
    if (tid == 0) {
        last_in = in;
        last_n = n;
    }
}
