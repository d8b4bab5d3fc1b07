// Part 1 (part1_naive). BUG: the student pads an odd length with the identity so that the first
// step can add pairs, in a while loop that never advances `len`: for odd n > 1 its condition never
// changes and the loop (one barrier per round, so nothing can optimise it away) never ends. n = 1
// and even n skip the loop and are scanned right.
// EXPECTED: fail, kind deadlock (an endless loop: on a GPU alone, a timeout), at every odd n > 1
// (here 33); pass at the other n.

__global__ void naive_scan(const scan_t* in, scan_t* out, int n)
{
    extern __shared__ scan_t buf[];  // two buffers of BLOCK_SIZE
    int i = threadIdx.x;

    buf[i] = (i < n) ? in[i] : 0;
    __syncthreads();  // loaded before thread 0 pads
    int len = n;
    while (len > 1 && len % 2 != 0) {  // odd: append one identity element
        if (i == 0)
            buf[len] = 0;
        __syncthreads();
        // missing: len++;
    }
    __syncthreads();

    int src = 0;
    for (int d = 1; d < len; d *= 2) {
        int dst = BLOCK_SIZE - src;
        buf[dst + i] = (i >= d) ? buf[src + i] + buf[src + i - d] : buf[src + i];
        src = dst;
        __syncthreads();
    }
    if (i < n)
        out[i] = buf[src + i];
}
