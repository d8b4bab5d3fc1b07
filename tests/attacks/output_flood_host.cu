// ATTACK output_flood_host: a static constructor writes 512 MiB to stdout and to stderr (host code,
// not device printf, so nothing of the emulator caps it), hoping to fill the grader's disk or
// memory, or to bury its report. Expected: the sandbox's file-size limit (64 MiB) stops the
// process (a message naming the limit), or the output is thrown away; no file behind its stdout or
// stderr grows past 64 MiB; the grading ends promptly; the result and the report stay small.

__attribute__((constructor)) static void sg_attack(void)
{
    static char block[1 << 20];
    memset(block, 'F', sizeof block);
    for (int i = 0; i < 512; ++i) {
        fwrite(block, 1, sizeof block, stdout);
        fwrite(block, 1, sizeof block, stderr);
    }
    fflush(stdout);
    fflush(stderr);
}

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
