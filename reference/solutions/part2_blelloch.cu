// Part 2 reference: work-efficient exclusive scan of one block.
//
// Algorithm: G. E. Blelloch, "Prefix sums and their applications" (CMU-CS-90-190, 1990),
// the up-sweep (reduce) / down-sweep scan over a balanced binary tree; presented for CUDA in
// M. Harris, GPU Gems 3, section 39.2.2. It does O(n) additions: about 2n in the up-sweep and
// down-sweep together, against O(n log n) for Hillis-Steele.
//
// Contract (the grader prepends BLOCK_SIZE, scan_t and the extern "C" declaration):
//   grid 1, block BLOCK_SIZE, 2 * BLOCK_SIZE * sizeof(scan_t) bytes of dynamic shared memory;
//   1 <= n <= 2 * BLOCK_SIZE; out[0] = 0 and out[i] = in[0] + ... + in[i-1] for 0 < i < n.
//
// Each thread loads two elements, tid and tid + BLOCK_SIZE (so a warp reads consecutive
// addresses), and the tree always spans all 2 * BLOCK_SIZE slots: slots at or past n hold the
// identity 0, which is how any n, not only a power of two, is handled.

__global__ void blelloch_scan(const scan_t* in, scan_t* out, int n)
{
    extern __shared__ scan_t s[];  // 2 * BLOCK_SIZE elements
    int tid = threadIdx.x;
    int ai = tid;
    int bi = tid + BLOCK_SIZE;

    s[ai] = (ai < n) ? in[ai] : 0;
    s[bi] = (bi < n) ? in[bi] : 0;

    // Up-sweep: at each level, the right node of every pair of adjacent subtrees (each of
    // `offset` leaves) becomes their sum; d pairs take part. Afterwards the last slot holds the
    // total of all 2 * BLOCK_SIZE slots.
    int offset = 1;
    for (int d = BLOCK_SIZE; d > 0; d /= 2) {
        // Loads (first pass) or the previous level's sums complete before this level reads them.
        __syncthreads();
        if (tid < d) {
            int left = offset * (2 * tid + 1) - 1;
            int right = offset * (2 * tid + 2) - 1;
            s[right] = s[right] + s[left];
        }
        offset *= 2;
    }

    // The root gets the identity. The last up-sweep level was done by thread 0 alone, so thread
    // 0 sees its own write here without a barrier.
    if (tid == 0)
        s[2 * BLOCK_SIZE - 1] = 0;

    // Down-sweep: walking back down the tree, every node passes its value (the sum of everything
    // to the left of its subtree) to its left child, and that value plus the left child's old
    // sum to its right child. At the leaves this is the exclusive prefix sum.
    for (int d = 1; d <= BLOCK_SIZE; d *= 2) {
        offset /= 2;
        // The previous level (or the cleared root) complete before this level reads it.
        __syncthreads();
        if (tid < d) {
            int left = offset * (2 * tid + 1) - 1;
            int right = offset * (2 * tid + 2) - 1;
            scan_t t = s[left];
            s[left] = s[right];
            s[right] = s[right] + t;
        }
    }
    __syncthreads();  // the last level complete before slots written by other threads are stored

    if (ai < n)
        out[ai] = s[ai];
    if (bi < n)
        out[bi] = s[bi];
}
