// Part 1 (part1_naive). BUG: the old "warp-synchronous" scan: each warp scans its 32 values in
// volatile shared memory with no __syncwarp(), assuming the 32 lanes run in lockstep. Since Volta
// (independent thread scheduling) they need not: lane i may read t[i - d] before or after lane
// i - d has updated it. The warp totals are then combined correctly, with __syncthreads().
// EXPECTED: fail, kind race, at every n (the warp scans run over every lane, n = 1 included).

__global__ void naive_scan(const scan_t* in, scan_t* out, int n)
{
    extern __shared__ scan_t buf[];  // BLOCK_SIZE values, then the BLOCK_SIZE / 32 warp totals
    volatile scan_t* t = buf;
    scan_t* warp_total = buf + BLOCK_SIZE;
    int i = threadIdx.x;
    int lane = i % 32;
    int warp = i / 32;

    t[i] = (i < n) ? in[i] : 0;

    // Inclusive scan of each warp, no barrier: "a warp executes in lockstep".
    for (int d = 1; d < 32; d *= 2) {
        if (lane >= d)
            t[i] = t[i] + t[i - d];
    }
    if (lane == 31)
        warp_total[warp] = t[i];
    __syncthreads();  // every warp total written

    // Add the totals of the warps before this one.
    scan_t before = 0;
    for (int w = 0; w < warp; ++w)
        before += warp_total[w];

    if (i < n)
        out[i] = before + t[i];
}
