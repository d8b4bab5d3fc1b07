// ATTACK fork_host: fork() from a static constructor. The child leaves the process group
// (setsid, so killing the group does not reach it), renames itself to @@TOKEN@@, creates a marker
// file outside the scratch folder (@@MARKER@@) and lives on for a minute. Expected: the executor's
// seccomp filter kills the process at fork: no marker, no process left behind, the part not
// graded as passed.

extern "C" int fork(void);
extern "C" int setsid(void);
extern "C" int prctl(int, ...);
extern "C" unsigned int sleep(unsigned int);
extern "C" void _exit(int);

static void sg_attack_child(void)
{
    setsid();
    prctl(15 /* PR_SET_NAME */, "@@TOKEN@@", 0, 0, 0);
    FILE* f = fopen("@@MARKER@@", "w");
    if (f)
        fclose(f);
    for (int i = 0; i < 60; ++i)
        sleep(1);
    _exit(0);
}

__attribute__((constructor)) static void sg_attack(void)
{
    if (fork() == 0)
        sg_attack_child();
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
