// Part 1 (part1_naive). BUG: Hillis-Steele in one shared buffer with no barrier between the read of
// t[i - d] and the write of t[i]: thread i - d may already have added its own step-d term when
// thread i reads it. Whether the output comes out wrong depends on how the warps are scheduled; the
// access pattern is a race every time.
// EXPECTED: fail, kind race, at every n > 1 (n = 1 runs no step).

__global__ void naive_scan(const scan_t* in, scan_t* out, int n)
{
    extern __shared__ scan_t t[];
    int i = threadIdx.x;

    t[i] = (i < n) ? in[i] : 0;
    __syncthreads();

    for (int d = 1; d < n; d *= 2) {
        if (i >= d)
            t[i] += t[i - d];  // reads t[i - d] while thread i - d may be writing it
        __syncthreads();
    }

    if (i < n)
        out[i] = t[i];
}
