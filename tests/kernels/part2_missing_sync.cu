// BROKEN (race): the __syncthreads() at the top of the up-sweep loop is missing; fails every n >= 3 when threads run one after another in ascending order (emulator), on a GPU only by chance (seen on an H200 at most n >= 127 for BLOCK_SIZE 512, never at BLOCK_SIZE 32).
//
// That barrier is also the one between the loads and the first level. Run one thread after
// another, thread 0 goes through every up-sweep level before thread 1 has even loaded: it adds
// s[1] (not yet loaded) into its own partial sums, then thread 1's load overwrites s[1] with
// in[1]. The level-1 sum in[0] + in[1] is lost, so out[2] = (what out[0] got) + in[1] instead of
// in[0] + in[1]: out[0] or out[2] is wrong whenever in[0] != 0, whatever shared memory held
// before. The upper levels add values other threads have not written yet as well.

__global__ void blelloch_scan(const scan_t* in, scan_t* out, int n)
{
    extern __shared__ scan_t s[];
    int tid = threadIdx.x;
    int ai = tid;
    int bi = tid + BLOCK_SIZE;

    s[ai] = (ai < n) ? in[ai] : 0;
    s[bi] = (bi < n) ? in[bi] : 0;

    int offset = 1;
    for (int d = BLOCK_SIZE; d > 0; d /= 2) {
        // missing: __syncthreads();  (loads / previous level complete before this level reads)
        if (tid < d) {
            int left = offset * (2 * tid + 1) - 1;
            int right = offset * (2 * tid + 2) - 1;
            s[right] = s[right] + s[left];
        }
        offset *= 2;
    }

    if (tid == 0)
        s[2 * BLOCK_SIZE - 1] = 0;

    for (int d = 1; d <= BLOCK_SIZE; d *= 2) {
        offset /= 2;
        __syncthreads();
        if (tid < d) {
            int left = offset * (2 * tid + 1) - 1;
            int right = offset * (2 * tid + 2) - 1;
            scan_t t = s[left];
            s[left] = s[right];
            s[right] = s[right] + t;
        }
    }
    __syncthreads();

    if (ai < n)
        out[ai] = s[ai];
    if (bi < n)
        out[bi] = s[bi];
}
