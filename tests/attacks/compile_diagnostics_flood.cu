// ATTACK compile_diagnostics_flood: a small file whose compile never stops printing: 2^20 failed
// static_asserts, each with a long message and a chain of twenty "in expansion of macro" notes, about
// 4 GB of diagnostics, which the compiler prints until its timeout while an unsandboxed grader reads
// them all. Expected: a compile error within seconds, the compiler stopped once its output passes
// the cap read from the pipe; the message says the output was cut and keeps the first error.

#define SG_E0 static_assert(0, "sg_diagnostics_flood: every expansion of this macro is one more error, "\
                                "with a long message and a chain of notes quoting the macros");
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
#define SG_E11 SG_E10 SG_E10
#define SG_E12 SG_E11 SG_E11
#define SG_E13 SG_E12 SG_E12
#define SG_E14 SG_E13 SG_E13
#define SG_E15 SG_E14 SG_E14
#define SG_E16 SG_E15 SG_E15
#define SG_E17 SG_E16 SG_E16
#define SG_E18 SG_E17 SG_E17
#define SG_E19 SG_E18 SG_E18
#define SG_E20 SG_E19 SG_E19

static void sg_flood(void) { SG_E20 }

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
