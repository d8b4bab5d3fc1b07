// BROKEN (bound): trims the tree to size = next power of two >= n but clears s[n - 1] instead of s[size - 1]; right when n is a power of two, wrong at every other n (out[0] = the total instead of 0).
//
// This is GPU Gems' `temp[n - 1] = 0`, correct there only because n is a power of two. At other
// n the root keeps the total, which the down-sweep hands down the left edge of the tree to
// out[0] (and adds to everything else), while one interior partial sum is wrongly zeroed.

__global__ void blelloch_scan(const scan_t* in, scan_t* out, int n)
{
    extern __shared__ scan_t s[];
    int tid = threadIdx.x;
    int ai = tid;
    int bi = tid + BLOCK_SIZE;

    int size = 1;  // leaves of the tree: the smallest power of two >= n
    while (size < n)
        size *= 2;

    s[ai] = (ai < n) ? in[ai] : 0;
    s[bi] = (bi < n) ? in[bi] : 0;

    int offset = 1;
    for (int d = size / 2; d > 0; d /= 2) {
        __syncthreads();
        if (tid < d) {
            int left = offset * (2 * tid + 1) - 1;
            int right = offset * (2 * tid + 2) - 1;
            s[right] = s[right] + s[left];
        }
        offset *= 2;
    }

    if (tid == 0)
        s[n - 1] = 0;  // should be s[size - 1], the root

    for (int d = 1; d < size; d *= 2) {
        offset /= 2;
        __syncthreads();
        if (tid < d) {
            int left = offset * (2 * tid + 1) - 1;
            int right = offset * (2 * tid + 2) - 1;
            scan_t t = s[left];
            s[left] = s[right];
            s[right] = s[right] + t;
        }
    }
    __syncthreads();

    if (ai < n)
        out[ai] = s[ai];
    if (bi < n)
        out[bi] = s[bi];
}
