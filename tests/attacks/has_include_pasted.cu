// ATTACK has_include_pasted: `__has_include` pasted together by a macro (`__has_ ## include`) inside
// `#if`, out of pieces no filter of the written text recognises as the operator; GCC and nvcc's
// preprocessor evaluate the pasted operator, so `#error` tells whether the private config
// @@TARGET@@ exists (without bubblewrap). Expected: refused by the directive filter naming the line
// of the piece `__has_`.

#define SG_PASTE(a, b) a##b

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

#if SG_PASTE(__has_, include)("@@TARGET@@")
#error probe: the private config exists
#else
#error probe: the private config is absent
#endif
