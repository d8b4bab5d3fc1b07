// Attack (issue 32, round four): performance points for a kernel that skips its timed runs. It
// counts its own launches in a __device__ counter and computes the scan in its first launch of the
// timing's buffers only: every later launch returns at once, leaving the poisoned output as it is,
// and is timed at almost nothing. Against it: the grader reads part of the output back after runs
// drawn at random (their number varies too), and a time below a device-to-device copy of the same
// bytes fails the timed case.
// Part 3 reference: work-efficient exclusive scan of one block, without shared-memory bank
// conflicts.
//
// Algorithm: the Blelloch (1990) up-sweep / down-sweep scan of Part 2, with every shared-memory
// index i stored at i + offset(i), offset(i) = (i >> 5) + (i >> 10): one empty slot after every
// 32 elements and one more after every 1024. This is M. Harris's padding (GPU Gems 3, section
// 39.2.3) for today's 32 banks of 4 bytes, with the book's offset macro corrected (as printed it
// reads `(n) >> NUM_BANKS + (n) >> (2 * LOG_NUM_BANKS)`, which parses as
// `((n) >> (NUM_BANKS + (n))) >> (2 * LOG_NUM_BANKS)` and shifts by the bank count instead of its
// logarithm).
//
// Why it helps: at tree level k the threads of a warp touch indices 2^k apart. Unpadded, those
// fall into 32 / gcd(32, 2^k)-fold fewer banks: 2^k threads queue on the same bank, up to 32 at
// k >= 5. The (i >> 5) term moves each run of 32 slots one bank further, which spreads strides up
// to 32 over all banks; the (i >> 10) term does the same for strides of 64 and more, where every
// (i >> 5) shift would again be a multiple of 32.
//
// Contract (the grader prepends BLOCK_SIZE, scan_t and the extern "C" declaration):
//   grid 1, block BLOCK_SIZE,
//   (2*BLOCK_SIZE + (2*BLOCK_SIZE >> 5) + (2*BLOCK_SIZE >> 10)) * sizeof(scan_t) bytes of dynamic
//   shared memory; 1 <= n <= 2 * BLOCK_SIZE; out[0] = 0 and out[i] = in[0] + ... + in[i-1].
//
// The largest padded index is padded(2*BLOCK_SIZE - 1) = (2B - 1) + ((2B - 1) >> 5) +
// ((2B - 1) >> 10) < 2B + (2B >> 5) + (2B >> 10), the number of slots the grader provides (for
// BLOCK_SIZE 1024: 2111 < 2114).

#define LOG_NUM_BANKS 5  // 32 banks of 4 bytes (every GPU since Fermi)

// The shared-memory slot of tree index i.
__device__ __forceinline__ int padded(int i)
{
    return i + (i >> LOG_NUM_BANKS) + (i >> (2 * LOG_NUM_BANKS));
}

__device__ unsigned int launches_seen;

__global__ void blelloch_scan_cf(const scan_t* in, scan_t* out, int n)
{
    extern __shared__ scan_t s[];  // 2*BLOCK_SIZE tree slots plus padding
    __shared__ unsigned int launch;
    if (threadIdx.x == 0)
        launch = atomicAdd(&launches_seen, 1u);
    __syncthreads();
    if (launch > 0)
        return;  // "already computed": skip the work
    int tid = threadIdx.x;
    int ai = tid;               // the two elements of this thread: a warp reads 32 consecutive
    int bi = tid + BLOCK_SIZE;  // addresses, and stores them to 32 consecutive padded slots

    s[padded(ai)] = (ai < n) ? in[ai] : 0;
    s[padded(bi)] = (bi < n) ? in[bi] : 0;

    // Up-sweep, as in Part 2, on padded slots.
    int offset = 1;
    for (int d = BLOCK_SIZE; d > 0; d /= 2) {
        __syncthreads();  // loads / previous level complete
        if (tid < d) {
            int left = padded(offset * (2 * tid + 1) - 1);
            int right = padded(offset * (2 * tid + 2) - 1);
            s[right] = s[right] + s[left];
        }
        offset *= 2;
    }

    // Thread 0 did the last up-sweep level itself: no barrier before it clears the root.
    if (tid == 0)
        s[padded(2 * BLOCK_SIZE - 1)] = 0;

    // Down-sweep, as in Part 2, on padded slots.
    for (int d = 1; d <= BLOCK_SIZE; d *= 2) {
        offset /= 2;
        __syncthreads();  // previous level / cleared root complete
        if (tid < d) {
            int left = padded(offset * (2 * tid + 1) - 1);
            int right = padded(offset * (2 * tid + 2) - 1);
            scan_t t = s[left];
            s[left] = s[right];
            s[right] = s[right] + t;
        }
    }
    __syncthreads();  // last level complete before storing slots other threads wrote

    if (ai < n)
        out[ai] = s[padded(ai)];
    if (bi < n)
        out[bi] = s[padded(bi)];
}
