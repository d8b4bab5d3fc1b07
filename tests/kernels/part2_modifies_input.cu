// BROKEN: the output is right, but the kernel overwrites in[0], which the contract says is read-only; fails every n.

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

    if (tid == 0)
        const_cast<scan_t*>(in)[0] = 0;  // scratch use of the input
    if (ai < n)
        out[ai] = s[ai];
    if (bi < n)
        out[bi] = s[bi];
}
