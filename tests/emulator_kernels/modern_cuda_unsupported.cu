// Inline PTX the emulator does not run (tests/backends/test_emulator_modern_cuda.py): a byte permutation.
extern "C" __global__ void permute(int* out, int n) {
    unsigned r;
    unsigned a = 0x03020100u, b = 0x07060504u;
    asm("prmt.b32 %0, %1, %2, 0x3210;" : "=r"(r) : "r"(a), "r"(b));  // LINE:prmt
    out[threadIdx.x] = (int)r;
}
