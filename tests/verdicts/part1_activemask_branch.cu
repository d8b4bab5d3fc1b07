// Part 1 (part1_naive). CORRECT on sm_70+: the shape of a course's warp-shuffle scan (Stanford
// CS149's), written afresh. Each warp scans its 32 values with __shfl_up_sync; the warp totals go to
// shared memory; then the first BLOCK_SIZE / 32 threads (lanes 0-15 of warp 0 at BLOCK_SIZE 512)
// scan the totals inside `if (threadIdx.x < BLOCK_SIZE / 32)`, taking their mask from
// __activemask() and their count from __ballot_sync(mask, 1), while lanes 16-31 of warp 0 wait at
// the __syncthreads() after the branch. On a Volta-or-later GPU __activemask() there returns the
// lanes inside the branch (0x0000ffff; measured on an H100), so the ballot and the shuffles
// complete among them.
// EXPECTED: pass at every n.

__global__ void naive_scan(const scan_t* in, scan_t* out, int n)
{
    __shared__ scan_t warp_total[BLOCK_SIZE / 32];
    int i = threadIdx.x;
    int lane = i % 32;
    int warp = i / 32;

    // First level: an inclusive scan of each warp's 32 values.
    scan_t v = (i < n) ? in[i] : 0;
    for (int d = 1; d < 32; d *= 2) {
        scan_t up = __shfl_up_sync(0xffffffffu, v, d);
        if (lane >= d)
            v += up;
    }
    if (lane == 31)
        warp_total[warp] = v;
    __syncthreads();

    // Second level: one thread per warp total, in the first warp only.
    if (i < BLOCK_SIZE / 32) {
        unsigned mask = __activemask();
        int lanes = __popc(__ballot_sync(mask, 1));
        scan_t t = warp_total[i];
        for (int d = 1; d < lanes; d *= 2) {
            scan_t up = __shfl_up_sync(mask, t, d);
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
