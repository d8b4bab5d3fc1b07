// ATTACK template_bomb: a compile bomb by template recursion: each Bomb<N, K> instantiates two
// distinct Bomb<N - 1, ...>, so Bomb<28, 0> asks the compiler for 2^29 class instantiations (every
// one distinct: no memoising helps), far more time and memory than any compile may take.
// Expected: a compile error (the sandbox's memory limit for a compile) or a timeout while
// compiling, within the configured timeouts.part_s; no compiler process left behind.

template <int N, int K>
struct Bomb {
    static const long value = Bomb<N - 1, 2 * K>::value + Bomb<N - 1, 2 * K + 1>::value;
};

template <int K>
struct Bomb<0, K> {
    static const long value = K;
};

static const long sg_boom = Bomb<28, 0>::value;

__global__ void naive_scan(const scan_t* in, scan_t* out, int n)
{
    if (threadIdx.x == 0) {  // correct, if slow: one thread scans serially
        scan_t sum = 0;
        for (int i = 0; i < n; ++i) {
            sum += in[i];
            out[i] = sum;
        }
    }
}
