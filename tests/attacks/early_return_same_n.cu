// ATTACK early_return_same_n: skips the work when launched again with the same n, as if the output
// still held the answer of the previous launch (the idea of tests/kernels/part1_early_return.cu,
// keyed on n alone so it never depends on where buffers land). Each correctness case launches it
// once, so without checks it passes on the emulator, correctly; it must not earn anything it did
// not compute. Expected: with the emulator's checks (each case run under three thread orders, each
// run on freshly poisoned buffers) the second run finds its output never written: every case with
// a repeated n fails; on a GPU the timed runs (output poisoned before each) fail it the same way.

__device__ int sg_last_n = -1;

__global__ void naive_scan(const scan_t* in, scan_t* out, int n)
{
    if (n == sg_last_n)
        return;  // "the output already holds the answer"
    if (threadIdx.x == 0) {  // otherwise an honest (serial) scan
        scan_t sum = 0;
        for (int i = 0; i < n; ++i) {
            sum += in[i];
            out[i] = sum;
        }
    }
    __syncthreads();
    if (threadIdx.x == 0)
        sg_last_n = n;
}
