// QUESTIONABLE (undefined in C++, clamped on a GPU; used by tests/backends/test_integrity_checks.py): shifts a 32-bit
// int by 32 or more, which the emulator computes as PTX does (0) with a shift-clamped warning.

extern "C" __global__ void shift_kernel(int* out, int n)
{
    int i = threadIdx.x;
    out[i] = i >> (n + i);  // LINE:shift
}
