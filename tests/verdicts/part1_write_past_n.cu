// Part 1 (part1_naive). BUG: the store has no bound: every thread writes out[i] for i < BLOCK_SIZE,
// so at n < BLOCK_SIZE the threads i >= n write past the end of out (the scan itself is right:
// elements past n are padded with 0).
// EXPECTED: fail, kind out-of-bounds, at every n < BLOCK_SIZE; pass at n = BLOCK_SIZE.

__global__ void naive_scan(const scan_t* in, scan_t* out, int n)
{
    extern __shared__ scan_t buf[];  // two buffers of BLOCK_SIZE
    int i = threadIdx.x;
    scan_t* cur = buf;
    scan_t* next = buf + BLOCK_SIZE;

    cur[i] = (i < n) ? in[i] : 0;
    __syncthreads();
    for (int d = 1; d < n; d *= 2) {
        next[i] = (i >= d) ? cur[i] + cur[i - d] : cur[i];
        __syncthreads();
        scan_t* tmp = cur;
        cur = next;
        next = tmp;
    }

    out[i] = cur[i];  // missing: if (i < n)
}
