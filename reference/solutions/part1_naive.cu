// Part 1 reference: naive inclusive scan of one block.
//
// Algorithm: Hillis & Steele, "Data parallel algorithms" (CACM, 1986), the step-doubling scan
// also known as Kogge-Stone; presented for CUDA in M. Harris, GPU Gems 3, section 39.2.1.
// After the step with offset d, element i holds the sum of the (up to) 2d inputs ending at i,
// so ceil(log2 n) steps leave the inclusive prefix sum in every element. It does
// O(n log n) additions, which is why it is the "naive" scan.
//
// Contract (the grader prepends BLOCK_SIZE, scan_t and the extern "C" declaration):
//   grid 1, block BLOCK_SIZE, 2 * BLOCK_SIZE * sizeof(scan_t) bytes of dynamic shared memory;
//   1 <= n <= BLOCK_SIZE; out[i] = in[0] + ... + in[i] for 0 <= i < n.
//
// Thread i owns element i. Two buffers of BLOCK_SIZE elements alternate: each step reads one
// and writes the other, so no thread overwrites a value another thread still has to read in
// the same step, and one barrier per step is enough.

__global__ void naive_scan(const scan_t* in, scan_t* out, int n)
{
    extern __shared__ scan_t buf[];  // 2 * BLOCK_SIZE elements: two buffers of BLOCK_SIZE
    int tid = threadIdx.x;

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
}
