// Part 3 (part3_conflict_free). QUESTIONABLE, RIGHT ON A GPU: GPU Gems 3's CONFLICT_FREE_OFFSET
// macro as the book prints it, with today's 32 banks: `+` binds tighter than `>>`, so it is
// ((n) >> (32 + (n))) >> 10, a shift by 32 or more bits, undefined in C++. A GPU's shift clamps the
// count, so every offset is 0: no padding, Part 2's bank conflicts, and a right result at every n.
// EXPECTED: pass at every n (a checker may warn about the shift; it must not fail the case).

#define NUM_BANKS 32
#define LOG_NUM_BANKS 5
#define CONFLICT_FREE_OFFSET(n) ((n) >> NUM_BANKS + (n) >> (2 * LOG_NUM_BANKS))

__global__ void blelloch_scan_cf(const scan_t* in, scan_t* out, int n)
{
    extern __shared__ scan_t temp[];  // 2 * BLOCK_SIZE slots plus padding
    int tid = threadIdx.x;
    int ai = tid + CONFLICT_FREE_OFFSET(tid);
    int bi = tid + BLOCK_SIZE + CONFLICT_FREE_OFFSET(tid + BLOCK_SIZE);

    temp[ai] = (tid < n) ? in[tid] : 0;
    temp[bi] = (tid + BLOCK_SIZE < n) ? in[tid + BLOCK_SIZE] : 0;

    int offset = 1;
    for (int d = BLOCK_SIZE; d > 0; d /= 2) {
        __syncthreads();
        if (tid < d) {
            int l = offset * (2 * tid + 1) - 1;
            int r = offset * (2 * tid + 2) - 1;
            temp[r + CONFLICT_FREE_OFFSET(r)] += temp[l + CONFLICT_FREE_OFFSET(l)];
        }
        offset *= 2;
    }
    if (tid == 0) {
        int root = 2 * BLOCK_SIZE - 1;
        temp[root + CONFLICT_FREE_OFFSET(root)] = 0;
    }
    for (int d = 1; d <= BLOCK_SIZE; d *= 2) {
        offset /= 2;
        __syncthreads();
        if (tid < d) {
            int l = offset * (2 * tid + 1) - 1;
            int r = offset * (2 * tid + 2) - 1;
            l += CONFLICT_FREE_OFFSET(l);
            r += CONFLICT_FREE_OFFSET(r);
            scan_t x = temp[l];
            temp[l] = temp[r];
            temp[r] += x;
        }
    }
    __syncthreads();

    if (tid < n)
        out[tid] = temp[ai];
    if (tid + BLOCK_SIZE < n)
        out[tid + BLOCK_SIZE] = temp[bi];
}
