// Part 1: naive inclusive scan of one block (Hillis-Steele).
//
// Write the kernel below. The grader puts a header before this file that defines
//   #define BLOCK_SIZE <threads per block>   (a power of two from 32 to 1024; 512 by default)
//   typedef <element type> scan_t;           (int or float: every part is graded with both;
//                                            write nothing type-specific)
// and declares the kernel: do not define BLOCK_SIZE or scan_t yourself, and keep the signature
// exactly as it is. The grader does all the host work (memory, copies, the launch).
// Headers: only the standard C, C++ and CUDA headers that README.md lists ("What the grader gives
// you"), in angle brackets; nothing else (no file of your own, no CUB, no Thrust) is compiled.
//
// Contract:
//   naive_scan(in, out, n): inclusive scan, out[i] = in[0] + ... + in[i] for 0 <= i < n.
//   1 <= n <= BLOCK_SIZE.
//   Launched with grid 1, block BLOCK_SIZE, and 2 * BLOCK_SIZE * sizeof(scan_t) bytes of dynamic
//   shared memory (enough for two buffers of BLOCK_SIZE elements).
//   Read only in[0 .. n-1], write only out[0 .. n-1], and never modify in.
//
// Algorithm (Hillis & Steele 1986; GPU Gems 3, section 39.2.1): in the step with offset d
// (d = 1, 2, 4, ...), every element i >= d adds the element d places to its left, as it was
// before the step.

__global__ void naive_scan(const scan_t* in, scan_t* out, int n)
{
    // TODO: declare the shared memory the grader provides:
    //       extern __shared__ scan_t buf[];   (2 * BLOCK_SIZE elements)

    // TODO: load: thread threadIdx.x copies in[threadIdx.x] into shared memory, or the
    //       identity 0 when threadIdx.x >= n (never read in[] at or past n).

    // TODO: barrier: every element must be loaded before any thread reads a neighbour.

    // TODO: the loop, for offset = 1, 2, 4, ... while offset < n:
    //       - read your element and, if threadIdx.x >= offset, add the element offset places
    //         to the left, using the values from BEFORE this step;
    //       - write the new value. Either write into the other half of the shared memory
    //         (double buffer, swap halves every step), or keep one buffer: read into a register,
    //         __syncthreads(), then write;
    //       - __syncthreads() so the step is complete before the next one reads it.
    //       Every thread must reach every __syncthreads(): no barrier inside an if that only
    //       some threads enter, and no early return before one.

    // TODO: store: if threadIdx.x < n, write the result to out[threadIdx.x].
}
