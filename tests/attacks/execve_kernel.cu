// ATTACK execve_kernel: execve() of a shell from inside a kernel (thread 0 of the first launch),
// replacing the process that runs it; the shell (argv[0] @@TOKEN@@) creates a marker file
// (@@MARKER@@) and runs for a minute. nvcc -ptx refuses a kernel calling a host function (a compile
// error with the cross-check on); with it off the seccomp filter must kill the executor at
// execve. Expected either way: no marker, no process left behind, no case passed.

extern "C" int execve(const char*, char* const[], char* const[]);

__global__ void naive_scan(const scan_t* in, scan_t* out, int n)
{
    if (threadIdx.x == 0 && blockIdx.x == 0) {
        char* const argv[] = {(char*)"@@TOKEN@@", (char*)"-c", (char*)"touch '@@MARKER@@'; i=0; while [ $i -lt 60 ]; do sleep 1; i=$((i+1)); done", nullptr};
        char* const envp[] = {(char*)"PATH=/usr/bin:/bin", nullptr};
        execve("/bin/sh", argv, envp);
    }
    if (threadIdx.x == 0) {  // an honest (serial) scan, if the execve failed
        scan_t sum = 0;
        for (int i = 0; i < n; ++i) {
            sum += in[i];
            out[i] = sum;
        }
    }
}
