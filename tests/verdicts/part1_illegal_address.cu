// Part 1 (part1_naive). BUG: a leftover debugging store through a wild index: every thread also
// writes out[i + (1 << 28)], a gigabyte past the output, far outside any buffer. The scan itself
// is right.
// EXPECTED: fail, kind out-of-bounds, at every n (all of this corpus's Part 1 cases are within the
// emulator's checks_max_n, where the bounds check sees the store before it is made; on a GPU,
// compute-sanitizer's memcheck).

#define DEBUG_SLOT (1 << 28)

__global__ void naive_scan(const scan_t* in, scan_t* out, int n)
{
    extern __shared__ scan_t buf[];  // two buffers of BLOCK_SIZE
    int i = threadIdx.x;
    int src = 0;

    buf[i] = (i < n) ? in[i] : 0;
    __syncthreads();
    for (int d = 1; d < n; d *= 2) {
        int dst = BLOCK_SIZE - src;
        buf[dst + i] = (i >= d) ? buf[src + i] + buf[src + i - d] : buf[src + i];
        src = dst;
        __syncthreads();
    }

    out[i + DEBUG_SLOT] = buf[src + i];  // "where I looked at the values in the debugger"
    if (i < n)
        out[i] = buf[src + i];
}
