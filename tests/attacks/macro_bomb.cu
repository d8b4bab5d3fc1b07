// ATTACK macro_bomb: a compile bomb by macro expansion: each SG_Bk expands to two SG_B(k-1), so
// SG_B34 is 2^34 tokens (about 17 billion), which the preprocessor expands and the parser reads in
// full. Expected: a compile error (the sandbox's memory limit for a compile) or a timeout while
// compiling, within the configured timeouts.part_s; no compiler process left behind.

#define SG_B0 1 +
#define SG_B1 SG_B0 SG_B0
#define SG_B2 SG_B1 SG_B1
#define SG_B3 SG_B2 SG_B2
#define SG_B4 SG_B3 SG_B3
#define SG_B5 SG_B4 SG_B4
#define SG_B6 SG_B5 SG_B5
#define SG_B7 SG_B6 SG_B6
#define SG_B8 SG_B7 SG_B7
#define SG_B9 SG_B8 SG_B8
#define SG_B10 SG_B9 SG_B9
#define SG_B11 SG_B10 SG_B10
#define SG_B12 SG_B11 SG_B11
#define SG_B13 SG_B12 SG_B12
#define SG_B14 SG_B13 SG_B13
#define SG_B15 SG_B14 SG_B14
#define SG_B16 SG_B15 SG_B15
#define SG_B17 SG_B16 SG_B16
#define SG_B18 SG_B17 SG_B17
#define SG_B19 SG_B18 SG_B18
#define SG_B20 SG_B19 SG_B19
#define SG_B21 SG_B20 SG_B20
#define SG_B22 SG_B21 SG_B21
#define SG_B23 SG_B22 SG_B22
#define SG_B24 SG_B23 SG_B23
#define SG_B25 SG_B24 SG_B24
#define SG_B26 SG_B25 SG_B25
#define SG_B27 SG_B26 SG_B26
#define SG_B28 SG_B27 SG_B27
#define SG_B29 SG_B28 SG_B28
#define SG_B30 SG_B29 SG_B29
#define SG_B31 SG_B30 SG_B30
#define SG_B32 SG_B31 SG_B31
#define SG_B33 SG_B32 SG_B32
#define SG_B34 SG_B33 SG_B33

static const int sg_boom = SG_B34 1;

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
