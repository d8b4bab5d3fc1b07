// ATTACK execve_host: execve() of a shell from a static constructor, replacing the process that
// loads the module; the shell (argv[0] @@TOKEN@@) creates a marker file (@@MARKER@@) and runs for a
// minute. Expected: the executor's seccomp filter kills the process at execve: no marker, no
// process left behind, the part not graded as passed (an error, or a timeout at worst).

extern "C" int execve(const char*, char* const[], char* const[]);

__attribute__((constructor)) static void sg_attack(void)
{
    char* const argv[] = {(char*)"@@TOKEN@@", (char*)"-c", (char*)"touch '@@MARKER@@'; i=0; while [ $i -lt 60 ]; do sleep 1; i=$((i+1)); done", nullptr};
    char* const envp[] = {(char*)"PATH=/usr/bin:/bin", nullptr};
    execve("/bin/sh", argv, envp);
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
