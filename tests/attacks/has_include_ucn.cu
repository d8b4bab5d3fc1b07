// ATTACK has_include_ucn: `__has_include` spelled with a universal character name
// (`__has_\u0069nclude`), which a filter that compares spellings does not recognise; GCC decodes the
// name, reports an error about the UCN and evaluates the test anyway, so `#error` tells whether the
// private config @@TARGET@@ exists. Expected: refused by the directive filter naming the line.

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

#if __has_\u0069nclude("@@TARGET@@")
#error probe: the private config exists
#else
#error probe: the private config is absent
#endif
