// ATTACK popen_host: popen() from a static constructor: the shell creates a marker file
// (@@MARKER@@), leaves a shell running (named by @@TOKEN@@) and prints /etc/passwd, which the
// constructor copies to stderr before exiting with a status (the grader quotes the tail of a
// module's stderr when it exits). Expected: the seccomp filter kills the process at fork/exec:
// no marker, no process left behind, /etc/passwd nowhere in the result, the part not passed.

extern "C" void _exit(int);

__attribute__((constructor)) static void sg_attack(void)
{
    FILE* p = popen("touch '@@MARKER@@'; (setsid sh -c 'i=0; while [ $i -lt 60 ]; do sleep 1; i=$((i+1)); done' @@TOKEN@@ >/dev/null 2>&1 &); cat /etc/passwd", "r");
    if (!p)
        return;
    char buf[4096];
    size_t got = fread(buf, 1, sizeof buf - 1, p);
    buf[got] = 0;
    pclose(p);
    fputs(buf, stderr);
    fputs(buf, stdout);
    fflush(stdout);
    fflush(stderr);
    if (got)
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
