// BROKEN (never terminates at n = 33 only): a right Hillis-Steele scan, but at n = 33 every thread
// spins on a volatile shared flag nobody sets. The grader stops that case at timeouts.case_s and
// grades the cases after it in a new worker: only n = 33 is lost.

__global__ void naive_scan(const scan_t* in, scan_t* out, int n)
{
    extern __shared__ scan_t s[];  // only the first BLOCK_SIZE elements are used
    __shared__ int ready;
    volatile int* flag = &ready;
    int i = threadIdx.x;

    if (i == 0)
        *flag = 0;
    s[i] = (i < n) ? in[i] : 0;
    __syncthreads();
    while (n == 33 && *flag == 0) {
    }
    for (int offset = 1; offset < n; offset *= 2) {
        scan_t v = s[i];
        if (i >= offset)
            v = v + s[i - offset];
        __syncthreads();
        s[i] = v;
        __syncthreads();
    }
    if (i < n)
        out[i] = s[i];
}
