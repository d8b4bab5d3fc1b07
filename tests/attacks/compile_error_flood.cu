// ATTACK compile_error_flood: 1,024 compile errors (each use of __COUNTER__ names another
// undeclared function, so the compiler reports every one), each with a chain of "in expansion of
// macro" notes: about 2 MB of compiler diagnostics, hoping to bury the report or fill the grader's
// memory. Expected: a compile error whose message in the result and the report is capped
// to a small size (tens of KiB), still naming the file and the first error.

#define SG_CAT2(a, b) a##b
#define SG_CAT(a, b) SG_CAT2(a, b)
#define SG_E0 SG_CAT(sg_undeclared_function_to_make_every_error_message_of_the_compiler_longer_, __COUNTER__)();
#define SG_E1 SG_E0 SG_E0
#define SG_E2 SG_E1 SG_E1
#define SG_E3 SG_E2 SG_E2
#define SG_E4 SG_E3 SG_E3
#define SG_E5 SG_E4 SG_E4
#define SG_E6 SG_E5 SG_E5
#define SG_E7 SG_E6 SG_E6
#define SG_E8 SG_E7 SG_E7
#define SG_E9 SG_E8 SG_E8
#define SG_E10 SG_E9 SG_E9

static void sg_flood(void) { SG_E10 }

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
