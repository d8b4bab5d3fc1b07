// ATTACK sizes_detect: a Part 2 kernel that special-cases the sizes of the public config the test
// writes (@@SIZES@@, plus n = 1 and the one-block maximum, which are always graded) and writes
// zeros for any other n: it passes every case a student can see. Expected: the hidden sizes of a
// TA's private config fail; the student's report shows hidden cases by number and status only
// (never their n); the part is not graded as passed.

__global__ void blelloch_scan(const scan_t* in, scan_t* out, int n)
{
    const int known[] = {@@SIZES@@, 1, 2 * BLOCK_SIZE};
    bool seen = false;
    for (int k = 0; k < (int)(sizeof known / sizeof known[0]); ++k)
        seen = seen || n == known[k];
    if (!seen) {
        for (int i = threadIdx.x; i < n; i += BLOCK_SIZE)
            out[i] = 0;
        return;
    }
    if (threadIdx.x == 0) {  // a correct (serial) exclusive scan for the sizes it knows
        scan_t sum = 0;
        for (int i = 0; i < n; ++i) {
            out[i] = sum;
            sum += in[i];
        }
    }
}
