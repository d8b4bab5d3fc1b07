// ATTACK include_private_config: the TA's private config (hidden sizes, hidden seed) included with
// angle brackets, hoping the compiler's "expected declaration" errors print its lines. The test
// passes the same file as --private-config / private_config. Expected: refused by the #include
// allow-list; a compile error; the hidden seed and the file's token nowhere in the result.
#include <@@TARGET@@>

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
