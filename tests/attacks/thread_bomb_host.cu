// ATTACK thread_bomb_host: a static constructor starts 10,000 threads (pthread_create; std::thread
// is the same call) that each spin for ever, so that the machine's cores go to them and classmates
// graded at the same time (batch --jobs 2) time out. Expected: the executor started the emulator's
// worker threads before loading the module, and refuses any other (its seccomp filter refuses
// clone/clone3; pthread_create is caught before the call, to name it): the process is stopped at
// the first thread, the part fails with a sandbox violation naming thread creation, no thread is
// left (the test finds the executor by its module's path), and the classmate's grade is the grade
// it gets alone.

extern "C" int pthread_create(unsigned long*, const void*, void* (*)(void*), void*);
extern "C" int pthread_detach(unsigned long);

static void* sg_attack_spin(void*)
{
    volatile unsigned long spins = 0;
    for (;;)
        spins = spins + 1;
    return nullptr;
}

__attribute__((constructor)) static void sg_attack(void)
{
    for (int i = 0; i < 10000; ++i) {
        unsigned long t;
        if (pthread_create(&t, nullptr, sg_attack_spin, nullptr) == 0)
            pthread_detach(t);
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
