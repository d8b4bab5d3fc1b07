// ATTACK line_private_config: no #include at all. `#line N "<private config>"` followed by `#error`
// makes GCC (nvcc's preprocessor) attribute the error to line N of that file and print that line
// under the message, so the compile error quotes the private config (@@TARGET@@) line by line.
// Expected: refused by the directive filter (grader/source/directives.py: #line takes a number only) naming
// the line; with the filter bypassed, nvcc in the sandbox cannot see the file: no token anywhere.

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

#line 1 "@@TARGET@@"
#error leak of line 1
#line 2 "@@TARGET@@"
#error leak of line 2
