// Part 3: work-efficient exclusive scan of one block, without shared-memory bank conflicts.
//
// Write the kernel below. The grader puts a header before this file that defines
//   #define BLOCK_SIZE <threads per block>   (a power of two from 32 to 1024; 512 by default)
//   typedef <element type> scan_t;           (int or float: write nothing type-specific)
// and declares the kernel: do not define BLOCK_SIZE or scan_t yourself, and keep the signature
// exactly as it is. The grader does all the host work (memory, copies, the launch).
// Headers: only the standard C, C++ and CUDA headers that README.md lists ("What the grader gives
// you"), in angle brackets; nothing else (no file of your own, no CUB, no Thrust) is compiled.
//
// Contract: the same as Part 2.
//   blelloch_scan_cf(in, out, n): exclusive scan, out[0] = 0 and out[i] = in[0] + ... + in[i-1]
//   for 0 < i < n.
//   1 <= n <= 2 * BLOCK_SIZE, any n (not only powers of two). Each thread handles two elements.
//   Launched with grid 1, block BLOCK_SIZE, and
//     (2 * BLOCK_SIZE + (2 * BLOCK_SIZE >> 5) + (2 * BLOCK_SIZE >> 10)) * sizeof(scan_t)
//   bytes of dynamic shared memory: one slot per element plus the padding below.
//   Read only in[0 .. n-1], write only out[0 .. n-1], and never modify in.
//
// Algorithm: your Part 2 scan, with every shared-memory index i replaced by the padded index
//   i + (i >> LOG_NUM_BANKS) + (i >> (2 * LOG_NUM_BANKS)),   LOG_NUM_BANKS = 5 (32 banks),
// GPU Gems 3, section 39.2.3, with its offset macro corrected (see the handout): one unused slot
// after every 32 elements and one more after every 1024, so that the threads of a warp, which
// touch elements 2, 4, 8, ... apart in the sweeps, fall into different banks.

__global__ void blelloch_scan_cf(const scan_t* in, scan_t* out, int n)
{
    // TODO: declare the shared memory the grader provides:
    //       extern __shared__ scan_t s[];

    // TODO: write a helper (a macro or a __device__ function) that maps an index i to its padded
    //       slot i + (i >> 5) + (i >> 10). Put parentheses around every shift: + binds tighter
    //       than >>.

    // TODO: load two elements per thread, threadIdx.x and threadIdx.x + BLOCK_SIZE, into their
    //       padded slots; the identity 0 for indices at or past n (never read in[] there).

    // TODO: up-sweep as in Part 2 (a __syncthreads() before each level), computing left and right
    //       as in Part 2 and then padding both.

    // TODO: one thread sets the padded root, slot of 2 * BLOCK_SIZE - 1, to 0.

    // TODO: down-sweep as in Part 2 (a __syncthreads() before each level), on padded indices.

    // TODO: __syncthreads(), then store both of your elements that are < n into out, read from
    //       their padded slots.
}
