// CORRECT (must pass every n): Blelloch with a static __shared__ array instead of extern, over a tree trimmed to the next power of two >= n.

__global__ void blelloch_scan(const scan_t* in, scan_t* out, int n)
{
    __shared__ scan_t s[2 * BLOCK_SIZE];
    int tid = threadIdx.x;

    // Smallest power of two >= n: the tree only needs that many leaves (same in every thread).
    int size = 1;
    while (size < n)
        size *= 2;

    s[tid] = (tid < n) ? in[tid] : 0;
    s[tid + BLOCK_SIZE] = (tid + BLOCK_SIZE < n) ? in[tid + BLOCK_SIZE] : 0;

    // Up-sweep over `size` leaves.
    for (int stride = 1; stride < size; stride *= 2) {
        __syncthreads();
        int right = (tid + 1) * 2 * stride - 1;
        if (right < size)
            s[right] = s[right] + s[right - stride];
    }

    if (tid == 0)
        s[size - 1] = 0;

    // Down-sweep.
    for (int stride = size / 2; stride >= 1; stride /= 2) {
        __syncthreads();
        int right = (tid + 1) * 2 * stride - 1;
        if (right < size) {
            scan_t left_sum = s[right - stride];
            s[right - stride] = s[right];
            s[right] = s[right] + left_sum;
        }
    }
    __syncthreads();

    if (tid < n)
        out[tid] = s[tid];
    if (tid + BLOCK_SIZE < n)
        out[tid + BLOCK_SIZE] = s[tid + BLOCK_SIZE];
}
