// Part 1 (part1_naive), for bench/throughput.py's hang row. BUG: a right Hillis-Steele scan, but at
// n = 1 every thread waits, at a barrier each round, for a flag that nothing sets: it never ends
// (on a GPU a real hang; the emulator's checks see the block go round the same barrier with
// nothing in memory changing and report a deadlock). The other sizes are scanned right.

__global__ void naive_scan(const scan_t* in, scan_t* out, int n)
{
    extern __shared__ scan_t buf[];  // two buffers of BLOCK_SIZE
    __shared__ int ready;
    volatile int* flag = &ready;
    int i = threadIdx.x;
    int src = 0;

    if (i == 0)
        *flag = 0;
    buf[i] = (i < n) ? in[i] : 0;
    __syncthreads();
    while (n == 1 && *flag == 0) {  // "wait until the data is ready": nothing ever says it is
        __syncthreads();
    }
    for (int d = 1; d < n; d *= 2) {
        int dst = BLOCK_SIZE - src;
        buf[dst + i] = (i >= d) ? buf[src + i] + buf[src + i - d] : buf[src + i];
        src = dst;
        __syncthreads();
    }
    if (i < n)
        out[i] = buf[src + i];
}
