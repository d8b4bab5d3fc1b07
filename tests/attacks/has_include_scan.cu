// ATTACK has_include_scan: no #include at all. `__has_include("<path>")` answers whether a file
// exists, and `#error` reports the answer, so a submission can probe the TA's machine (the grader's
// folders through /proc/<pid>/cwd, the private config @@TARGET@@). Expected: refused by the directive
// filter naming the line; with the filter bypassed, nvcc in the sandbox sees no such file.

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

#if __has_include("@@TARGET@@")
#error probe: the private config exists
#else
#error probe: the private config is absent
#endif
