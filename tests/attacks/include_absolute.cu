// ATTACK include_absolute: #include of a private file by its absolute path, so that the compiler's
// error messages quote its lines into the report. The test writes a canary file and puts its path
// for @@TARGET@@. Expected: refused by the #include allow-list (grader/source/directives.py) before any
// compiler runs; a compile error naming the line; the canary's token nowhere in the result.
#include "@@TARGET@@"

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
