// BROKEN (never terminates): every thread, thread 0 included, spins on a volatile shared flag that only thread 0 sets, after its own wait; hangs at every n (the grader's timeout must stop it).

__global__ void naive_scan(const scan_t* in, scan_t* out, int n)
{
    extern __shared__ scan_t buf[];
    __shared__ int ready;
    volatile int* flag = &ready;
    int tid = threadIdx.x;

    if (tid == 0)
        *flag = 0;
    buf[tid] = (tid < n) ? in[tid] : 0;
    __syncthreads();

    // "Wait until thread 0 says the data is ready": but thread 0 waits here too, and it only
    // sets the flag below the loop, so the flag stays 0 forever. The read is volatile, so the
    // compiler must re-read it on every iteration and cannot remove the loop.
    while (*flag == 0) {
    }
    if (tid == 0)
        *flag = 1;

    for (int offset = 1; offset < n; offset *= 2) {
        scan_t v = buf[tid];
        if (tid >= offset)
            v = v + buf[tid - offset];
        __syncthreads();
        buf[tid] = v;
        __syncthreads();
    }
    if (tid < n)
        out[tid] = buf[tid];
}
