// ATTACK hash_macro_include: no directive names a file. `#define SG_HASH #`, then a line
// `SG_HASH include "@@TARGET@@"`: the directive filter sees a #define and a line of code. nvcc's
// first stage (the host preprocessor) prints ` # include "@@TARGET@@"`, and cicc, which preprocesses
// that output again, includes the private config and quotes it in its errors: on the GPU compile, and
// in the emulator's nvcc cross-check (the `__shared__` initializer below sends the emulator to compile
// the file as written, with nvcc first). Without bubblewrap the whole config, seed and hidden sizes,
// reached the compile error. Expected: refused before nvcc's second stage, naming the line, with or
// without bubblewrap; nothing of the file anywhere.

#define SG_HASH #
SG_HASH include "@@TARGET@@"

__global__ void naive_scan(const scan_t* in, scan_t* out, int n)
{
    __shared__ int unused = 0;
    if (threadIdx.x == 0) {  // correct, if slow: one thread scans serially
        scan_t sum = 0;
        for (int i = 0; i < n; ++i) {
            sum += in[i];
            out[i] = sum;
        }
    }
}
