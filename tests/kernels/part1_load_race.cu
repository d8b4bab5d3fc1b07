// BROKEN (race): no __syncthreads() between loading the block's elements into shared memory and
// the first Hillis-Steele step, which reads a neighbour's element. Run one thread after another in
// ascending order (the emulator without checks) every neighbour has loaded already, so it passes;
// in descending order, or on a GPU where warps interleave, a thread may read a slot not yet
// loaded. The emulator's checks (three thread orders, race detection) fail it at every n.

__global__ void naive_scan(const scan_t* in, scan_t* out, int n)
{
    extern __shared__ scan_t buf[];  // two buffers of BLOCK_SIZE elements
    int tid = threadIdx.x;
    scan_t* src = buf;
    scan_t* dst = buf + BLOCK_SIZE;
    src[tid] = (tid < n) ? in[tid] : 0;
    // the missing barrier belongs here
    for (int offset = 1; offset < BLOCK_SIZE; offset *= 2) {
        dst[tid] = src[tid] + (tid >= offset ? src[tid - offset] : 0);
        __syncthreads();
        scan_t* t = src;
        src = dst;
        dst = t;
    }
    if (tid < n) out[tid] = src[tid];
}
