// ATTACK oob_write_far: a Part 1 kernel that scans correctly, then every thread writes a value far
// past the end of its output (1 Mi elements on), beyond the grader's 256-element guard zones,
// hoping to land in another case's buffers or another allocation. For the GPU (under the emulator
// such a write is an illegal address). Expected: the part is not graded as passed (its cases fail
// or error), and no other case's or part's result changes (the honest parts still pass).

__global__ void naive_scan(const scan_t* in, scan_t* out, int n)
{
    if (threadIdx.x == 0) {
        scan_t sum = 0;
        for (int i = 0; i < n; ++i) {
            sum += in[i];
            out[i] = sum;
        }
    }
    __syncthreads();
    out[(1 << 20) + threadIdx.x * 4099] = (scan_t)0x5ca1ab1e;
}
