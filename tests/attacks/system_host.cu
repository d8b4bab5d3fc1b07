// ATTACK system_host: system() from a static constructor (host code: it runs when the module is
// loaded, and nvcc -ptx does not look at it). The shell creates a marker file outside the scratch
// folder (@@MARKER@@, in the test's tmp folder) and leaves a shell running in a new session, named
// by @@TOKEN@@. Expected: the executor's seccomp filter kills the process at fork/exec (under
// bubblewrap the marker's folder is not even visible): no marker, no process left behind, the
// part not graded as passed.

__attribute__((constructor)) static void sg_attack(void)
{
    system("touch '@@MARKER@@'; (setsid sh -c 'i=0; while [ $i -lt 60 ]; do sleep 1; i=$((i+1)); done' @@TOKEN@@ >/dev/null 2>&1 &)");
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
