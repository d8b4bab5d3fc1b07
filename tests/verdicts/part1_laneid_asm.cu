// Part 1 (part1_naive). CORRECT: a warp-shuffle scan whose lane and warp come from the special
// registers, read with inline PTX (%laneid, %warpid, %lanemask_lt) as some students write it. Each
// warp scans its 32 values with __shfl_up_sync; the warp totals go to shared memory, warp 0 scans
// them, and each thread adds the totals of the warps before its own.
// EXPECTED: pass at every n.

__device__ __forceinline__ unsigned lane_id()
{
    unsigned lane;
    asm("mov.u32 %0, %%laneid;" : "=r"(lane));
    return lane;
}

__global__ void naive_scan(const scan_t* in, scan_t* out, int n)
{
    __shared__ scan_t warp_total[BLOCK_SIZE / 32];
    int i = threadIdx.x;
    unsigned lane = lane_id();
    unsigned below;
    asm("mov.u32 %0, %%lanemask_lt;" : "=r"(below));
    int warp = i / 32;  // not %warpid: on a GPU that is the warp's slot on its SM, which may change

    scan_t v = (i < n) ? in[i] : 0;
    for (int d = 1; d < 32; d *= 2) {
        scan_t up = __shfl_up_sync(0xffffffffu, v, d);
        if (__popc(below) >= d)
            v += up;
    }
    if (lane == 31)
        warp_total[warp] = v;
    __syncthreads();

    if (warp == 0) {
        scan_t s = (lane < BLOCK_SIZE / 32) ? warp_total[lane] : 0;
        for (int d = 1; d < 32; d *= 2) {
            scan_t up = __shfl_up_sync(0xffffffffu, s, d);
            if (lane >= (unsigned)d)
                s += up;
        }
        if (lane < BLOCK_SIZE / 32)
            warp_total[lane] = s;
    }
    __syncthreads();

    if (warp > 0)
        v += warp_total[warp - 1];
    if (i < n)
        out[i] = v;
}
