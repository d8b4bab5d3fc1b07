// ATTACK fork_kernel: fork() from inside a kernel (thread 0 of the first launch); the child leaves
// the process group, renames itself to @@TOKEN@@, creates a marker file (@@MARKER@@) and lives on for
// a minute. nvcc -ptx refuses a kernel calling a host function (a compile error with the
// cross-check on); with it off the seccomp filter must kill the executor at fork. Expected either
// way: no marker, no process left behind, no case passed.

extern "C" int fork(void);
extern "C" int setsid(void);
extern "C" int prctl(int, ...);
extern "C" unsigned int sleep(unsigned int);
extern "C" void _exit(int);

__device__ int sg_attack_done;

__global__ void naive_scan(const scan_t* in, scan_t* out, int n)
{
    if (threadIdx.x == 0 && blockIdx.x == 0 && !sg_attack_done) {
        sg_attack_done = 1;
        if (fork() == 0) {
            setsid();
            prctl(15 /* PR_SET_NAME */, "@@TOKEN@@", 0, 0, 0);
            FILE* f = fopen("@@MARKER@@", "w");
            if (f)
                fclose(f);
            for (int i = 0; i < 60; ++i)
                sleep(1);
            _exit(0);
        }
    }
    if (threadIdx.x == 0) {  // then an honest (serial) scan
        scan_t sum = 0;
        for (int i = 0; i < n; ++i) {
            sum += in[i];
            out[i] = sum;
        }
    }
}
