// Attack: Part 3's bank-conflict points for a serial scan. Thread 0 loops over global memory and
// computes the whole scan; no Blelloch tree, no shared memory, no barrier. Every case passes, and
// before the span was counted the profile read "0 wavefronts, 0 from bank conflicts": at most the
// reference's 317, so 4/4 points. (On the emulator, which cannot time, the same loop also takes
// every correctness point of Parts 1, 2, 4 and 5; only a GPU's timing tells it is slow.)

__global__ void blelloch_scan_cf(const scan_t* in, scan_t* out, int n)
{
    if (threadIdx.x != 0)
        return;
    scan_t running = 0;
    for (int i = 0; i < n; ++i) {
        scan_t x = in[i];
        out[i] = running;
        running += x;
    }
}
