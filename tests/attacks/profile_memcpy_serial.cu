// Attack: a serial scan with no step the profile counts. Thread 0 copies the input into a local
// array with memcpy, scans it there, and copies the result out with memcpy; one conflict-free store
// to shared memory makes the profile see shared traffic. The emulator's memcpy was libc's, which
// no memory hook sees: the span read 1 (a tree scan's is 79), so the serial scan kept Part 3's
// profile points; and a memcpy past a buffer's end escaped the bounds checks.

__global__ void blelloch_scan_cf(const scan_t* in, scan_t* out, int n)
{
    extern __shared__ scan_t s[];
    s[threadIdx.x] = 0;  // shared traffic for the profile to see
    if (threadIdx.x == 0) {
        scan_t buf[2 * BLOCK_SIZE];  // thread 0's own stack: no step
        memcpy(buf, in, n * sizeof(scan_t));
        scan_t running = 0;
        for (int i = 0; i < n; ++i) {
            scan_t x = buf[i];
            buf[i] = running;
            running += x;
        }
        memcpy(out, buf, n * sizeof(scan_t));
    }
}
