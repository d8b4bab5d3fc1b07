// ATTACK popen_kernel: popen() from inside a kernel (thread 0 of the first launch): creates a marker
// file (@@MARKER@@) and leaves a shell running (named by @@TOKEN@@). nvcc -ptx refuses a kernel
// calling a host function (a compile error with the cross-check on); with it off, the seccomp
// filter must kill the executor. Expected either way: no marker, no process left, no case passed.

__device__ int sg_attack_done;

__global__ void naive_scan(const scan_t* in, scan_t* out, int n)
{
    if (threadIdx.x == 0 && blockIdx.x == 0 && !sg_attack_done) {
        sg_attack_done = 1;
        FILE* p = popen("touch '@@MARKER@@'; (setsid sh -c 'i=0; while [ $i -lt 60 ]; do sleep 1; i=$((i+1)); done' @@TOKEN@@ >/dev/null 2>&1 &)", "r");
        if (p)
            pclose(p);
    }
    if (threadIdx.x == 0) {  // then an honest (serial) scan
        scan_t sum = 0;
        for (int i = 0; i < n; ++i) {
            sum += in[i];
            out[i] = sum;
        }
    }
}
