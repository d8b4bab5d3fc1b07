// A race (thread 31 reads what thread 0 wrote, no barrier) in every block; in block 0 it comes late
// (thread 0 computes for a while first), so another worker finds it in block 1 first. Used by
// tests/backends/test_integrity_checks.py: the finding kept is block 0's all the same.

extern "C" __global__ void late_race_in_block0(int* out, int n)
{
    __shared__ int s[32];
    unsigned acc = threadIdx.x;
    if (blockIdx.x == 0 && threadIdx.x == 0)
        for (int i = 0; i < n; ++i)
            acc = acc * 1103515245u + 12345u;
    s[threadIdx.x] = (int)acc;
    if (threadIdx.x == 31)
        out[blockIdx.x] = s[0];  // LINE:race
}
