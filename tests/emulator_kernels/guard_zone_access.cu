// BROKEN (bounds, used by tests/backends/test_integrity_checks.py): accesses just outside a buffer, in the grader's guard zones.

extern "C" __global__ void read_past(const int* in, int* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i <= n) {  // should be i < n
        int v = in[i];  // LINE:read-past
        if (i < n)
            out[i] = v;
        else if (v == 12345)  // uses the value, so the load stays where it is
            out[0] = 0;
    }
}

extern "C" __global__ void write_before(int* out, int n)
{
    int i = threadIdx.x;
    if (i < n)
        out[i - 1] = i;  // LINE:write-before
}
