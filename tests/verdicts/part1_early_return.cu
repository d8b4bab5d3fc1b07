// Part 1 (part1_naive). QUESTIONABLE: threads past the end return at once, before the loop whose
// __syncthreads() the others still reach. CUDA asks every thread of the block to reach each
// __syncthreads() in conditional code; on sm_70 and later exited threads no longer count at a
// barrier, so the output is right on today's GPUs. At n = BLOCK_SIZE no thread returns.
// EXPECTED: unsettled: the verdict is what a GPU with compute-sanitizer's synccheck says (the lead
// settles it with a GPU run; the emulator's checks report barrier-divergence today).

__global__ void naive_scan(const scan_t* in, scan_t* out, int n)
{
    extern __shared__ scan_t buf[];  // two buffers of BLOCK_SIZE
    int i = threadIdx.x;
    if (i >= n)
        return;  // nothing to do past the end

    int src = 0;
    buf[i] = in[i];
    __syncthreads();
    for (int d = 1; d < n; d *= 2) {
        int dst = BLOCK_SIZE - src;
        buf[dst + i] = (i >= d) ? buf[src + i] + buf[src + i - d] : buf[src + i];
        src = dst;
        __syncthreads();
    }
    out[i] = buf[src + i];
}
