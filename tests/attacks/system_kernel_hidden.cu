// ATTACK system_kernel_hidden: system() from inside a kernel, hidden from the nvcc -ptx
// cross-check with #ifndef cudaStreamTailLaunch (a macro of the cuda_runtime.h nvcc force-includes,
// which the emulator's stub headers lack; nvcc sees an honest kernel). Shows that the cross-check is no security boundary: only the sandbox is. Creates
// a marker file (@@MARKER@@) and leaves a shell running (named by @@TOKEN@@). Expected: the seccomp
// filter kills the executor at fork/exec: no marker, no process left behind, no case passed.

__device__ int sg_attack_done;

__global__ void naive_scan(const scan_t* in, scan_t* out, int n)
{
#ifndef cudaStreamTailLaunch
    if (threadIdx.x == 0 && blockIdx.x == 0 && !sg_attack_done) {
        sg_attack_done = 1;
        system("touch '@@MARKER@@'; (setsid sh -c 'i=0; while [ $i -lt 60 ]; do sleep 1; i=$((i+1)); done' @@TOKEN@@ >/dev/null 2>&1 &)");
    }
#endif
    if (threadIdx.x == 0) {  // an honest (serial) scan
        scan_t sum = 0;
        for (int i = 0; i < n; ++i) {
            sum += in[i];
            out[i] = sum;
        }
    }
}
