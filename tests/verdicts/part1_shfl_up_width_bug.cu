// Part 1 (part1_naive). BUG: a warp-shuffle scan (the usual `if (lane >= d) v += up` loop) whose
// __shfl_up_sync is given width 16: each half-warp is then a segment of its own, and where lane - d
// falls below the caller's segment the shuffle returns the caller's own value, which the upper half
// (lane >= d holds there) adds to itself. Every output past the 16th element of a warp is wrong.
// EXPECTED: fail, kind mismatch, at every n above 16.

__global__ void naive_scan(const scan_t* in, scan_t* out, int n)
{
    __shared__ scan_t warp_total[BLOCK_SIZE / 32];
    int i = threadIdx.x;
    int lane = i % 32;
    int warp = i / 32;

    scan_t v = (i < n) ? in[i] : 0;
    for (int d = 1; d < 32; d *= 2) {
        scan_t up = __shfl_up_sync(0xffffffffu, v, d, 16);  // BUG: width 16, not 32
        if (lane >= d)
            v += up;
    }
    if (lane == 31)
        warp_total[warp] = v;
    __syncthreads();

    scan_t before = 0;
    for (int w = 0; w < warp; ++w)
        before += warp_total[w];
    if (i < n)
        out[i] = before + v;
}
