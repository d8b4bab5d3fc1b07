// ATTACK exit_host: a static constructor writes a line to stderr and ends the process that loads
// the module with _exit(3), before the grader has run a single case (an exit, not a crash).
// Expected: the part is not graded as passed; the message says the module's process exited (status
// 3), with what it wrote to stderr at most, and never a traceback of the grader itself.

extern "C" void _exit(int);

__attribute__((constructor)) static void sg_attack(void)
{
    fputs("@@TOKEN@@ leaves\n", stderr);
    _exit(3);
}

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
