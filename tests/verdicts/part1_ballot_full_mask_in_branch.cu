// Part 1 (part1_naive). BUG: part1_activemask_branch.cu with a full mask where only part of the warp
// runs. The second-level scan of the warp totals runs inside `if (threadIdx.x < BLOCK_SIZE / 32)`
// (lanes 0-15 of warp 0 at BLOCK_SIZE 512), but its ballot and shuffles name all 32 lanes
// (0xffffffff), while lanes 16-31 wait at the __syncthreads() after the branch: the mask names lanes
// that never make the call, which CUDA leaves undefined (a GPU may hang, or complete the ballot with
// garbage). Pass __activemask(), or the lanes the branch keeps, as the mask.
// EXPECTED: fail, kind barrier-divergence, at every n (the second level runs whatever n is).

__global__ void naive_scan(const scan_t* in, scan_t* out, int n)
{
    __shared__ scan_t warp_total[BLOCK_SIZE / 32];
    int i = threadIdx.x;
    int lane = i % 32;
    int warp = i / 32;

    scan_t v = (i < n) ? in[i] : 0;
    for (int d = 1; d < 32; d *= 2) {
        scan_t up = __shfl_up_sync(0xffffffffu, v, d);
        if (lane >= d)
            v += up;
    }
    if (lane == 31)
        warp_total[warp] = v;
    __syncthreads();

    if (i < BLOCK_SIZE / 32) {
        int lanes = __popc(__ballot_sync(0xffffffffu, 1));  // BUG: lanes 16-31 are not here
        scan_t t = warp_total[i];
        for (int d = 1; d < lanes; d *= 2) {
            scan_t up = __shfl_up_sync(0xffffffffu, t, d);
            if (lane >= d)
                t += up;
        }
        warp_total[i] = t;
    }
    __syncthreads();

    if (warp > 0)
        v += warp_total[warp - 1];
    if (i < n)
        out[i] = v;
}
