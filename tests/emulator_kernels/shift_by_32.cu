// BROKEN (undefined shift, used by tests/test_integrity_checks.py): shifts a 32-bit int by 32 or more.

extern "C" __global__ void shift_kernel(int* out, int n)
{
    int i = threadIdx.x;
    out[i] = i >> (n + i);  // LINE:shift
}
