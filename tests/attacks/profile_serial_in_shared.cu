// Attack: profile_serial_scan.cu made to look like a shared-memory scan. Every thread loads its two
// elements into shared memory (conflict-free, coalesced), one barrier, then thread 0 alone runs the
// serial scan over shared memory, 16 bytes at a time (a quarter of the loads and stores of a scalar
// loop), one barrier, and every thread stores its two results. Shared traffic exists and has no
// bank conflict; only the span (the memory operations of thread 0: O(n), where a tree scan makes
// O(log n)) shows the scan is serial.

__global__ void blelloch_scan_cf(const scan_t* in, scan_t* out, int n)
{
    extern __shared__ scan_t s[];  // the first 2 * BLOCK_SIZE slots: the elements, in order
    int tid = threadIdx.x;
    int a = tid;
    int b = tid + BLOCK_SIZE;
    s[a] = (a < n) ? in[a] : 0;
    s[b] = (b < n) ? in[b] : 0;
    __syncthreads();
    if (tid == 0) {
        // 16-byte steps: four elements per load and per store (2 * BLOCK_SIZE is a multiple of 4,
        // and dynamic shared memory is 16-byte aligned).
        typedef struct { scan_t v[4]; } __align__(16) quad;
        quad* q = reinterpret_cast<quad*>(s);
        scan_t running = 0;
        for (int i = 0; i < 2 * BLOCK_SIZE / 4; ++i) {
            quad x = q[i];
            quad y;
            for (int k = 0; k < 4; ++k) {
                y.v[k] = running;
                running += x.v[k];
            }
            q[i] = y;
        }
    }
    __syncthreads();
    if (a < n)
        out[a] = s[a];
    if (b < n)
        out[b] = s[b];
}
