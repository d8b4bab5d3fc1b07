// Part 1 (part1_naive). CORRECT: shuffles across a width. Each half-warp scans its 16 values with
// __shfl_up_sync(..., width 16); the upper half then takes the lower half's total with
// __shfl_xor_sync(0xffffffff, total, 16, 16): a butterfly whose partner lies outside the caller's
// segment of 16 returns the partner's value when the partner's segment comes earlier (lanes 16-31
// read lanes 0-15) and the caller's own value when it comes later (the CUDA guide on
// __shfl_xor_sync; PTX's shfl.bfly; measured on an H100). Warp totals are combined through shared
// memory as usual.
// EXPECTED: pass at every n.

__global__ void naive_scan(const scan_t* in, scan_t* out, int n)
{
    __shared__ scan_t warp_total[BLOCK_SIZE / 32];
    int i = threadIdx.x;
    int lane = i % 32;
    int warp = i / 32;

    scan_t v = (i < n) ? in[i] : 0;
    for (int d = 1; d < 16; d *= 2) {
        scan_t up = __shfl_up_sync(0xffffffffu, v, d, 16);
        if (lane % 16 >= d)
            v += up;
    }
    scan_t half_total = __shfl_sync(0xffffffffu, v, 15, 16);  // lane 15 of this lane's half
    scan_t lower = __shfl_xor_sync(0xffffffffu, half_total, 16, 16);  // lanes 16-31: lanes 0-15's
    if (lane >= 16)
        v += lower;
    if (lane == 31)
        warp_total[warp] = v;
    __syncthreads();

    scan_t before = 0;
    for (int w = 0; w < warp; ++w)
        before += warp_total[w];
    if (i < n)
        out[i] = before + v;
}
