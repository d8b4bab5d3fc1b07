// ATTACK alloc_kernel: a kernel (thread 0 of block 0) allocates 100 GiB with device malloc and
// touches every page before scanning. Legal CUDA (device-side malloc), so nvcc accepts it.
// Expected: the allocation fails (NULL; the sandbox's address-space limit under the emulator, the
// device heap on a GPU) and the write through it is an illegal address: the case is an error, not
// a pass; the grader is unharmed (the next part, an honest one, passes).

__global__ void naive_scan(const scan_t* in, scan_t* out, int n)
{
    if (threadIdx.x == 0 && blockIdx.x == 0) {
        const unsigned long long bytes = 100ull << 30;
        volatile char* p = (volatile char*)malloc(bytes);
        for (unsigned long long i = 0; i < bytes; i += 4096)
            p[i] = 1;
        out[0] = p[bytes - 1];  // read back, so the compiler keeps the allocation and the writes
        free((void*)p);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        scan_t sum = 0;
        for (int i = 0; i < n; ++i) {
            sum += in[i];
            out[i] = sum;
        }
    }
}
