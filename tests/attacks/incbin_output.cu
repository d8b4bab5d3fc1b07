// ATTACK incbin_output: asm(".incbin") embeds a private file (@@TARGET@@, a canary) into the module;
// the kernel copies its bytes into the output array (the first mismatch's "got" value then shows
// them, 4 bytes an element) and device-printf's them. The copying is hidden from the nvcc -ptx
// cross-check with #ifndef cudaStreamTailLaunch (a macro of the cuda_runtime.h nvcc force-includes,
// which the emulator's stub headers lack), so nvcc sees an honest kernel. Expected: the compile runs
// in the sandbox, which does not see the file: a compile error; the token nowhere in the result,
// neither as text nor as output values.
#ifndef cudaStreamTailLaunch
asm(".pushsection .rodata\n"
    ".globl sg_attack_blob\n"
    "sg_attack_blob:\n"
    ".incbin \"@@TARGET@@\"\n"
    ".byte 0\n"
    ".popsection\n");
extern "C" const char sg_attack_blob[];
#endif

__global__ void naive_scan(const scan_t* in, scan_t* out, int n)
{
#ifndef cudaStreamTailLaunch
    if (threadIdx.x == 0) {
        printf("%s\n", sg_attack_blob);
        memcpy(out, sg_attack_blob, n * sizeof(scan_t) < 64 ? n * sizeof(scan_t) : 64);
    }
    return;
#endif
    if (threadIdx.x == 0) {  // what nvcc sees: an honest (serial) scan
        scan_t sum = 0;
        for (int i = 0; i < n; ++i) {
            sum += in[i];
            out[i] = sum;
        }
    }
}
