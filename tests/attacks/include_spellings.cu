// ATTACK include_spellings: the #include of a private file (@@TARGET@@) spelled so that a line-based
// filter misses it: the %: digraph for #, and a form feed between the # and the name. The
// preprocessor takes both for #include and quotes the file in its errors. Expected: refused by the
// directive filter (grader/source/directives.py tokenises as the preprocessor does) naming the line; nothing of
// the file in the result.

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

%:include "@@TARGET@@"
# include "@@TARGET@@"
