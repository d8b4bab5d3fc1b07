// Stack reuse: `leave` fills a local array; `read_uninit` reads its own local array, never written
// (volatile, so the reads stay). Used by tests/backends/test_integrity_checks.py.

extern "C" __global__ void leave(int* out, int n)
{
    volatile int a[4];
    for (int k = 0; k < 4; ++k)
        a[k] = n + k;
    out[threadIdx.x] = a[threadIdx.x & 3];
}

extern "C" __global__ void read_uninit(int* out, int n)
{
    volatile int a[4];
    out[threadIdx.x] = a[threadIdx.x & 3];
}
