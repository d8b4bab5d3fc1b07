// Reads of shared memory no thread of the block wrote (tests/backends/test_emulator_uninit.py). Signature
// (const int* in, int* out, int n). The tests find lines by the LINE: markers.

// Hillis-Steele inclusive scan of the first n elements, in place with a barrier between the reads
// and the writes. Threads t >= n load nothing, so the first step reads unwritten slots; those values
// only ever reach slots >= n, which are not stored: correct under any fill (and on a GPU).
__global__ void tail_unwritten(const int* in, int* out, int n) {
    __shared__ int temp[256];
    const int t = threadIdx.x;
    if (t < n) temp[t] = in[t];
    __syncthreads();
    for (int d = 1; d < blockDim.x; d <<= 1) {
        int v = temp[t];  // LINE:tail_own
        if (t >= d) v += temp[t - d];  // LINE:tail_left
        __syncthreads();
        temp[t] = v;
        __syncthreads();
    }
    if (t < n) out[t] = temp[t];
}

// A tree sum of the whole block with no identity padding past n: the unwritten slots reach out[0].
__global__ void sum_unwritten(const int* in, int* out, int n) {
    __shared__ int tile[256];
    const int t = threadIdx.x;
    if (t < n) tile[t] = in[t];
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (t < s) tile[t] += tile[t + s];  // LINE:sum_read
        __syncthreads();
    }
    if (t == 0) out[0] = tile[0];
}

// What unwritten static and dynamic shared arrays read: out = {never_written[n], dyn[n], the low
// and high words of wide[n], chars[4 * n .. 4 * n + 3] as an int}.
__global__ void read_fill(const int* in, int* out, int n) {
    __shared__ int never_written[4];
    __shared__ long long wide[2];
    __shared__ unsigned char chars[16];
    extern __shared__ int dyn[];
    if (threadIdx.x == 0) {
        out[0] = never_written[n];
        out[1] = dyn[n];
        out[2] = int(wide[n]);
        out[3] = int(wide[n] >> 32);
        out[4] = chars[4 * n] | chars[4 * n + 1] << 8 | chars[4 * n + 2] << 16 | chars[4 * n + 3] << 24;
    }
}

// Reads one element past the end of a (into the red zone before b): out of bounds.
__global__ void overrun_static(const int* in, int* out, int n) {
    __shared__ int a[32];
    __shared__ int b[32];
    const int t = threadIdx.x;
    a[t] = t;
    b[t] = -t;
    __syncthreads();
    out[t] = a[t + n] + b[t];  // LINE:overrun_static
}

// Reads dyn[n], past the launch's dynamic shared memory: out of bounds.
__global__ void overrun_dynamic(const int* in, int* out, int n) {
    extern __shared__ int dyn[];
    dyn[threadIdx.x] = 1;
    __syncthreads();
    out[threadIdx.x] = dyn[n];  // LINE:overrun_dynamic
}

// Thread 0 reads r[0], which nobody wrote, before the race: thread t + 1 reads r[t + 1], which
// thread t wrote with no barrier between (a race). Threads t >= 32 also read unwritten s[t].
__global__ void race_and_unwritten(const int* in, int* out, int n) {
    __shared__ int s[64];
    __shared__ int r[64];
    const int t = threadIdx.x;
    if (t < 32) s[t] = t;
    __syncthreads();
    int v = s[t];  // LINE:ru_read
    r[(t + 1) % 64] = v;
    out[t] = r[t];  // LINE:ru_race
}
