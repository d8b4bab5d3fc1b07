// ATTACK incbin_stderr: asm(".incbin") in host code embeds a private file (@@TARGET@@, a canary) into
// the module when it is assembled; a static constructor writes the bytes to stdout and stderr and
// exits with a status, so that the grader quotes the tail of the module's stderr in its message.
// Expected: the compile runs in the sandbox, which does not see the file, so the assembler fails:
// a compile error; the canary's token nowhere in the result, the report or the grader's output.
asm(".pushsection .rodata\n"
    ".globl sg_attack_blob\n"
    "sg_attack_blob:\n"
    ".incbin \"@@TARGET@@\"\n"
    ".byte 0\n"
    ".popsection\n");
extern "C" const char sg_attack_blob[];

extern "C" void _exit(int);

__attribute__((constructor)) static void sg_attack_leak(void)
{
    fputs(sg_attack_blob, stdout);
    fflush(stdout);
    fputs(sg_attack_blob, stderr);
    fflush(stderr);
    _exit(3);
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
