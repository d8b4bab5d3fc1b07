// BROKEN (race): the __syncthreads() inside the step loop is missing; fails every n >= 3 when threads run one after another in ascending order (emulator); on a GPU only by chance (seen on an H200 at n >= 500 for BLOCK_SIZE 512, not seen with a single warp, BLOCK_SIZE 32).
//
// Double-buffered Hillis-Steele. The student reasoned that with two buffers no thread overwrites
// what another reads in the same step, and dropped the barrier; but without it a thread can run
// into the next steps while others are still in an earlier one. Run one thread after another in
// ascending order (the emulator), thread t-d has already gone through every step and
// overwritten both buffers by the time thread t reads its slot, so thread t adds values from
// the wrong step: at n = 3, out[2] = 2*in[0] + in[1] + in[2].

__global__ void naive_scan(const scan_t* in, scan_t* out, int n)
{
    extern __shared__ scan_t buf[];
    int tid = threadIdx.x;

    int src = 0;
    buf[tid] = (tid < n) ? in[tid] : 0;
    __syncthreads();

    for (int offset = 1; offset < n; offset *= 2) {
        int dst = BLOCK_SIZE - src;
        scan_t v = buf[src + tid];
        if (tid >= offset)
            v = v + buf[src + tid - offset];
        buf[dst + tid] = v;
        src = dst;
        // missing: __syncthreads();
    }
    __syncthreads();

    if (tid < n)
        out[tid] = buf[src + tid];
}
