// CORRECT (must pass every n, and keep Part 3's profile points): not the padded Blelloch scan but a warp-shuffle scan: each thread adds its two consecutive elements, each warp scans those sums with __shfl_up_sync (Hillis-Steele across lanes), the warp totals go through shared memory, warp 0 scans them, and each thread adds its warp's offset. Two barriers and little shared memory: few wavefronts, none from bank conflicts.

__global__ void blelloch_scan_cf(const scan_t* in, scan_t* out, int n)
{
    extern __shared__ scan_t s[];  // s[0 .. BLOCK_SIZE / 32 - 1]: the warp totals, then their offsets
    const unsigned full = 0xffffffffu;
    int tid = threadIdx.x;
    int lane = tid & 31;
    int warp = tid >> 5;
    int i = 2 * tid;

    scan_t x0 = (i < n) ? in[i] : 0;
    scan_t x1 = (i + 1 < n) ? in[i + 1] : 0;
    scan_t mine = x0 + x1;
    scan_t inclusive = mine;
    for (int d = 1; d < 32; d *= 2) {
        scan_t y = __shfl_up_sync(full, inclusive, d);
        if (lane >= d)
            inclusive += y;
    }
    if (lane == 31)
        s[warp] = inclusive;
    __syncthreads();

    if (warp == 0) {
        scan_t total = (lane < BLOCK_SIZE / 32) ? s[lane] : 0;
        scan_t before = total;
        for (int d = 1; d < 32; d *= 2) {
            scan_t y = __shfl_up_sync(full, before, d);
            if (lane >= d)
                before += y;
        }
        if (lane < BLOCK_SIZE / 32)
            s[lane] = before - total;  // the exclusive offset of warp `lane`
    }
    __syncthreads();

    scan_t base = s[warp] + inclusive - mine;
    if (i < n)
        out[i] = base;
    if (i + 1 < n)
        out[i + 1] = base + x0;
}
