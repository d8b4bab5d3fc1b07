// ATTACK include_dev_zero: `#include "/dev/zero"`: the preprocessor reads an endless file and
// grows without bound (and /dev/urandom, a fifo... the same). Expected: refused by the directive filter;
// with the filter bypassed, nvcc in the sandbox is stopped by its address-space limit (4 GiB) within
// seconds, or by the compile timeout.

__global__ void naive_scan(const scan_t* in, scan_t* out, int n)
{
    if (threadIdx.x == 0) {  // correct, if slow: one thread scans serially
        scan_t sum = 0;
        for (int i = 0; i < n; ++i) {
            sum += in[i];
            out[i] = sum;
        }
    }
}

#include "/dev/zero"
