// Part 2: work-efficient exclusive scan of one block (Blelloch).
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
//   blelloch_scan(in, out, n): exclusive scan, out[0] = 0 and out[i] = in[0] + ... + in[i-1]
//   for 0 < i < n.
//   1 <= n <= 2 * BLOCK_SIZE, any n (not only powers of two). Each thread handles two elements.
//   Launched with grid 1, block BLOCK_SIZE, and 2 * BLOCK_SIZE * sizeof(scan_t) bytes of dynamic
//   shared memory (one slot per element of the largest input).
//   Read only in[0 .. n-1], write only out[0 .. n-1], and never modify in.
//
// Algorithm (Blelloch 1990; GPU Gems 3, section 39.2.2): an up-sweep (reduce) builds partial
// sums up a balanced binary tree over the shared array; the root is set to 0; a down-sweep walks
// back down, giving each left child its parent's value and each right child the parent's value
// plus the left child's old sum.

__global__ void blelloch_scan(const scan_t* in, scan_t* out, int n)
{
    // TODO: declare the shared memory the grader provides:
    //       extern __shared__ scan_t s[];   (2 * BLOCK_SIZE elements)

    // TODO: load two elements per thread, e.g. indices threadIdx.x and threadIdx.x + BLOCK_SIZE
    //       (neighbouring threads then read neighbouring addresses). Slots at or past n get the
    //       identity 0, so the tree always has 2 * BLOCK_SIZE leaves (a power of two) whatever n is.
    //       Never read in[] at or past n.

    // TODO: up-sweep: for d = BLOCK_SIZE, BLOCK_SIZE/2, ..., 1 (the number of pairs at this level),
    //       with offset = 1, 2, 4, ... (the size of the subtrees being joined):
    //       - __syncthreads() first (the loads, or the previous level, must be complete);
    //       - threads with threadIdx.x < d add the left subtree's sum into the right one's:
    //         left = offset * (2 * threadIdx.x + 1) - 1, right = offset * (2 * threadIdx.x + 2) - 1.

    // TODO: one thread sets the root, s[2 * BLOCK_SIZE - 1], to the identity 0.

    // TODO: down-sweep: for d = 1, 2, 4, ..., BLOCK_SIZE, with offset halving each level:
    //       - __syncthreads() first;
    //       - threads with threadIdx.x < d: t = s[left]; s[left] = s[right]; s[right] += t.
    //       Keep every __syncthreads() outside the if: all threads must reach it.

    // TODO: __syncthreads(), then store both of your elements that are < n into out.
}
