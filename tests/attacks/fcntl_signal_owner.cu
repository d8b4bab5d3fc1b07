// ATTACK fcntl_signal_owner: no kill() at all. A static constructor takes every descriptor it holds
// (its socket to the grader among them), makes another process its owner (fcntl F_SETOWN, here the test's
// victim, pid @@VICTIM@@: without bubblewrap, pids of classmates' workers are visible), asks for
// SIGKILL instead of SIGIO on I/O (F_SETSIG) and turns on signal-driven I/O (F_SETFL O_ASYNC): the
// kernel then kills the owner as soon as the grader writes the next launch request. F_SETOWN_EX is
// tried as well. Expected: the seccomp filter allows only the harmless fcntl commands:
// the module is stopped at the first refused one (a sandbox violation naming fcntl) and the victim
// lives; with bubblewrap the pid is not even in its namespace.

extern "C" int fcntl(int, int, ...);

static int sg_attack_result = 0;

__attribute__((constructor)) static void sg_attack(void)
{
    for (int fd = 3; fd < 64; ++fd) {  // every open descriptor past stdio: the grader's socket is one
        int flags = fcntl(fd, 3 /* F_GETFL */);
        if (flags < 0)
            continue;
        struct { int type; int pid; } owner = {1 /* F_OWNER_PID */, @@VICTIM@@};
        sg_attack_result |= fcntl(fd, 8 /* F_SETOWN */, @@VICTIM@@) == 0 ? 1 : 0;
        sg_attack_result |= fcntl(fd, 15 /* F_SETOWN_EX */, &owner) == 0 ? 2 : 0;
        sg_attack_result |= fcntl(fd, 10 /* F_SETSIG */, 9 /* SIGKILL */) == 0 ? 4 : 0;
        sg_attack_result |= fcntl(fd, 4 /* F_SETFL */, flags | 020000 /* O_ASYNC */) == 0 ? 8 : 0;
    }
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
