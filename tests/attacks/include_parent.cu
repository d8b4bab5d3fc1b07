// ATTACK include_parent: #include through ../ components, climbing out of wherever the grader
// compiles the file to the root and down to a private file (@@TARGET@@, absolute, so
// "../../..//tmp/..." resolves from any depth). Expected: refused by the #include allow-list; a
// compile error; the file's token nowhere in the result.
#include "../../../../../../../../../../../../../..@@TARGET@@"

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
