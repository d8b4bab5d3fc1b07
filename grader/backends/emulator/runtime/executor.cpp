// scangrade CPU emulator: the executor, the process that runs a student's emulated module.
//
// A student's .cu becomes native code under the emulator, so it never runs in the grader's own
// process (which holds the config, the hidden sizes and the expected outputs). The grader execs
// this small program, fresh, for each module, usually under bubblewrap (see sandbox.py):
//
//   executor serve --socket FD --memfd FD --arena ADDR SIZE --module PATH [--seccomp 0|1]
//                  [--as BYTES] [--fsize BYTES] [--nofile N] [--cpu SECONDS] [--threads N] [--parent PID]
//   executor limit [--as BYTES] [--fsize BYTES] [--nofile N] [--cpu SECONDS] -- COMMAND ARGS...
//   executor probe
//
// serve: sets its resource limits, maps the device-memory arena (a memfd the grader created) at
// the address the grader mapped it at, so device pointers mean the same in both processes,
// starts the N - 1 worker threads launches may use besides its own (--threads N: the only threads
// the module ever gets), installs a seccomp filter (an allow-list: no threads, fork, exec, sockets,
// ptrace...), and only then dlopens the module, whose static constructors run here. It then answers the grader's requests
// on the socket: launch a kernel (sg_launch, then the findings and the device printf output),
// trim (sg_trim), and snapshot or restore the module's own writable data (handle_globals: each run a
// case grades starts from the __device__ variables as loaded). It exits when the grader closes the socket.
//
// limit: sets the resource limits and execs COMMAND (the sandboxed compiler runs under it).
// probe: installs the seccomp filter and checks that it stops fork(), for describe().
//
// Wire format: frames of a little header {uint32 payload length, uint32 type} and the payload,
// on a stream socket. See executor.py for the payloads; both sides are in this repository and
// change together (SG_EXECUTOR_PROTOCOL).

#include "sg_host.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#if defined(SG_SECCOMP)
#include <sched.h>
#include <seccomp.h>
#endif

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

namespace {

constexpr uint32_t SG_EXECUTOR_PROTOCOL = 2;

// Frame types: requests from the grader, replies from the executor.
enum : uint32_t {
    REQ_LAUNCH = 1,
    REQ_TRIM = 2,
    REQ_PROFILE = 3,  // the memory-access profile: set on/off, take the totals (handle_profile)
    REQ_GLOBALS = 4,  // the module's writable data: snapshot it, or restore the snapshot (handle_globals)
    REP_HELLO = 0x81,
    REP_LAUNCHED = 0x82,
    REP_TRIMMED = 0x83,
    REP_PROFILE = 0x84,
    REP_GLOBALS = 0x85,
    REP_VIOLATION = 0xEE,
};

constexpr uint32_t kMaxRequest = 16u << 20;  // bytes of one request's payload
constexpr long kFindingsCap = 1 << 20;       // bytes of findings text sent back per launch
constexpr long kOutputCap = 64 * 1024 + 1;   // device printf output (the runtime keeps 64 KiB)
constexpr int kViolationExit = 97;           // exit status after reporting a seccomp violation

int g_sock = -1;

// ---- plumbing -----------------------------------------------------------------------------------

bool write_all(int fd, const void *data, size_t n) {
    const char *p = static_cast<const char *>(data);
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return false;
        p += w, n -= size_t(w);
    }
    return true;
}

bool read_all(int fd, void *data, size_t n) {
    char *p = static_cast<char *>(data);
    while (n) {
        ssize_t r = read(fd, p, n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return false;
        p += r, n -= size_t(r);
    }
    return true;
}

struct Writer {
    std::string buf;
    template <class T> void put(const T &v) { buf.append(reinterpret_cast<const char *>(&v), sizeof v); }
    void bytes(const void *p, size_t n) { buf.append(static_cast<const char *>(p), n); }
};

struct Reader {
    const char *p, *end;
    bool ok = true;
    template <class T> T get() {
        T v{};
        if (size_t(end - p) < sizeof v) {
            ok = false;
            return v;
        }
        memcpy(&v, p, sizeof v);
        p += sizeof v;
        return v;
    }
    const char *take(size_t n) {
        if (size_t(end - p) < n) {
            ok = false;
            return nullptr;
        }
        const char *q = p;
        p += n;
        return q;
    }
};

bool send_frame(uint32_t type, const std::string &payload) {
    uint32_t head[2] = {uint32_t(payload.size()), type};
    std::string frame(reinterpret_cast<const char *>(head), sizeof head);
    frame += payload;
    return write_all(g_sock, frame.data(), frame.size());
}

// HELLO: status (0 ready, 1 failed), protocol, module ABI version, seccomp active, sizeof(sg_result),
// then text: the kernels ("name\tdefined\tarity\n"...) or why loading failed.
[[noreturn]] void hello_failed(const std::string &why) {
    Writer w;
    w.put<int32_t>(1), w.put<int32_t>(int32_t(SG_EXECUTOR_PROTOCOL)), w.put<int32_t>(0), w.put<int32_t>(0);
    w.put<int32_t>(int32_t(sizeof(sg_result)));
    w.bytes(why.data(), why.size());
    send_frame(REP_HELLO, w.buf);
    _exit(1);
}

bool parse_u64(const char *s, unsigned long long *out) {
    if (!s || !*s) return false;
    char *end = nullptr;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 0);
    if (errno || *end) return false;
    *out = v;
    return true;
}

// ---- resource limits ------------------------------------------------------------------------------

struct Limits {
    unsigned long long as = 0, fsize = 0, nofile = 0, cpu = 0;  // 0: leave as is
    unsigned long long threads = 0;  // serve: worker threads of a launch, its own included (0: 1)
};

bool set_limit(int resource, unsigned long long value, std::string &why, const char *name) {
    if (!value) return true;
    struct rlimit cur;
    if (getrlimit(resource, &cur) != 0) cur.rlim_max = RLIM_INFINITY;
    rlim_t v = rlim_t(value);
    if (cur.rlim_max != RLIM_INFINITY && cur.rlim_max < v) v = cur.rlim_max;  // only ever lower
    struct rlimit r = {v, v};
    if (setrlimit(resource, &r) != 0) {
        why = std::string("cannot set ") + name + ": " + strerror(errno);
        return false;
    }
    return true;
}

bool apply_limits(const Limits &L, std::string &why) {
    struct rlimit none = {0, 0};
    setrlimit(RLIMIT_CORE, &none);
    return set_limit(RLIMIT_AS, L.as, why, "RLIMIT_AS") && set_limit(RLIMIT_FSIZE, L.fsize, why, "RLIMIT_FSIZE") &&
           set_limit(RLIMIT_NOFILE, L.nofile, why, "RLIMIT_NOFILE") && set_limit(RLIMIT_CPU, L.cpu, why, "RLIMIT_CPU");
}

// Parses "--as N --fsize N --nofile N --cpu N --threads N" at argv[*i]; false when argv[*i] is not
// one of them.
bool limit_option(char **argv, int argc, int *i, Limits &L, bool *bad) {
    const char *opt = argv[*i];
    unsigned long long *slot = !strcmp(opt, "--as") ? &L.as : !strcmp(opt, "--fsize") ? &L.fsize
                               : !strcmp(opt, "--nofile") ? &L.nofile : !strcmp(opt, "--cpu") ? &L.cpu
                               : !strcmp(opt, "--threads") ? &L.threads : nullptr;
    if (!slot) return false;
    if (*i + 1 >= argc || !parse_u64(argv[*i + 1], slot)) *bad = true;
    *i += 2;
    return true;
}

// Tells the grader which system call the sandbox refused (a VIOLATION frame) and exits.
[[noreturn]] void report_violation(int32_t nr, const char *name) {
    size_t len = strnlen(name, 63);
    char frame[8 + sizeof nr + 64];
    uint32_t head[2] = {uint32_t(sizeof nr + len), REP_VIOLATION};
    memcpy(frame, head, sizeof head);
    memcpy(frame + sizeof head, &nr, sizeof nr);
    memcpy(frame + sizeof head + sizeof nr, name, len);
    if (g_sock >= 0) write_all(g_sock, frame, sizeof head + sizeof nr + len);
    _exit(kViolationExit);
}

// ---- the thread pool --------------------------------------------------------------------------------
//
// A module gets no thread it did not get before its first instruction ran: the executor starts the
// runtime's worker threads here, before the seccomp filter (which then refuses clone and clone3) and
// before dlopen, and hands them to the runtime (sg_set_thread_pool). A submission that starts threads
// of its own (a thread bomb in a static constructor or a kernel) is stopped at the first one.

struct Pool {
    std::mutex mu;
    std::condition_variable work, done;
    std::vector<std::pair<void (*)(void *), void *>> tasks;  // one slot per thread; fn null: idle
    int pending = 0;
};
Pool *g_pool = nullptr;  // never freed: its threads live as long as the process

void pool_thread(unsigned slot) {
    std::unique_lock<std::mutex> lock(g_pool->mu);
    for (;;) {
        g_pool->work.wait(lock, [slot] { return g_pool->tasks[slot].first != nullptr; });
        auto task = g_pool->tasks[slot];
        lock.unlock();
        task.first(task.second);
        lock.lock();
        g_pool->tasks[slot].first = nullptr;
        if (--g_pool->pending == 0) g_pool->done.notify_all();
    }
}

int pool_start(void (*fn)(void *), void *const *args, int n) {
    std::lock_guard<std::mutex> lock(g_pool->mu);
    int started = 0;
    for (size_t slot = 0; slot < g_pool->tasks.size() && started < n; ++slot) {
        if (g_pool->tasks[slot].first) continue;
        g_pool->tasks[slot] = {fn, args[started++]};
        ++g_pool->pending;
    }
    if (started) g_pool->work.notify_all();
    return started;
}

void pool_wait() {
    std::unique_lock<std::mutex> lock(g_pool->mu);
    g_pool->done.wait(lock, [] { return g_pool->pending == 0; });
}

const sg_thread_pool kPool = {&pool_start, &pool_wait};

// Set once the pool is started: from then on no thread may be created.
std::atomic<bool> g_threads_closed{false};

}  // namespace

// pthread_create (and std::thread, through libstdc++) of the module resolves to this definition,
// the executable's: glibc blocks every signal around its clone, so the filter's SIGSYS would kill the
// process without the handler naming the call; this names it. The pool's own threads are started
// before, through glibc's.
extern "C" int pthread_create(pthread_t *thread, const pthread_attr_t *attr, void *(*start)(void *), void *arg) {
    if (g_threads_closed.load()) report_violation(-1, "pthread_create");
    using Create = int (*)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
    static Create real = reinterpret_cast<Create>(dlsym(RTLD_NEXT, "pthread_create"));
    return real ? real(thread, attr, start, arg) : EAGAIN;
}

namespace {

// Starts `count` threads; false (with why) when the system refuses one.
bool start_pool(unsigned long long count, std::string &why) {
    g_pool = new Pool();
    g_pool->tasks.assign(size_t(count), {nullptr, nullptr});
    for (unsigned slot = 0; slot < count; ++slot) {
        try {
            std::thread(pool_thread, slot).detach();
        } catch (const std::exception &e) {
            why = std::string("cannot start the emulator's worker threads: ") + e.what();
            return false;
        }
    }
    return true;
}

// ---- seccomp ----------------------------------------------------------------------------------------
//
// An allow-list: what glibc, the dynamic loader, libstdc++'s threads and the emulator runtime need
// (memory, futexes, signals for the fault handler, time, reading already-open descriptors and
// read-only opens for dlopen). Opening a file for writing fails with EACCES. No new thread: the
// pool's threads are started before the filter. Anything else (clone, clone3, fork, vfork, execve,
// socket, connect, ptrace, process_vm_*, mount, kill of another process, ...) raises SIGSYS before
// the call runs: the handler reports the system call to the grader and exits.

#if defined(SG_SECCOMP)
constexpr int kMaxNames = 512;
const char *g_syscall_names[kMaxNames];

void on_sigsys(int, siginfo_t *si, void *) {
    static std::atomic<int> reported{0};
    if (reported.exchange(1)) {
        for (;;) pause();  // another thread is reporting; the process exits soon
    }
    int32_t nr = si->si_syscall;
    report_violation(nr, nr >= 0 && nr < kMaxNames && g_syscall_names[nr] ? g_syscall_names[nr] : "?");
}

bool install_seccomp(std::string &why) {
    for (int nr = 0; nr < kMaxNames; ++nr) g_syscall_names[nr] = seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE, nr);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = &on_sigsys;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGSYS, &sa, nullptr) != 0) {
        why = std::string("cannot install the SIGSYS handler: ") + strerror(errno);
        return false;
    }
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_TRAP);
    if (!ctx) {
        why = "seccomp_init failed";
        return false;
    }
    const int allowed[] = {
        // memory
        SCMP_SYS(brk), SCMP_SYS(mmap), SCMP_SYS(munmap), SCMP_SYS(mprotect), SCMP_SYS(mremap), SCMP_SYS(madvise),
        // threads and synchronisation
        SCMP_SYS(futex), SCMP_SYS(set_robust_list), SCMP_SYS(get_robust_list), SCMP_SYS(rseq),
        SCMP_SYS(set_tid_address), SCMP_SYS(sched_yield), SCMP_SYS(sched_getaffinity), SCMP_SYS(gettid),
        SCMP_SYS(getpid), SCMP_SYS(getppid), SCMP_SYS(exit), SCMP_SYS(exit_group), SCMP_SYS(restart_syscall),
        // signals (the runtime's fault handler runs on an alternate stack)
        SCMP_SYS(rt_sigaction), SCMP_SYS(rt_sigprocmask), SCMP_SYS(rt_sigreturn), SCMP_SYS(sigaltstack),
        // time
        SCMP_SYS(clock_gettime), SCMP_SYS(clock_getres), SCMP_SYS(gettimeofday), SCMP_SYS(time),
        SCMP_SYS(nanosleep), SCMP_SYS(clock_nanosleep),
        // descriptors already open, and read-only file access (dlopen)
        SCMP_SYS(read), SCMP_SYS(pread64), SCMP_SYS(readv), SCMP_SYS(write), SCMP_SYS(writev), SCMP_SYS(close),
        SCMP_SYS(lseek), SCMP_SYS(fstat), SCMP_SYS(newfstatat), SCMP_SYS(stat), SCMP_SYS(lstat), SCMP_SYS(statx),
        SCMP_SYS(getdents64), SCMP_SYS(readlink), SCMP_SYS(readlinkat), SCMP_SYS(access),
        SCMP_SYS(faccessat), SCMP_SYS(faccessat2), SCMP_SYS(getcwd),
        // harmless facts
        SCMP_SYS(uname), SCMP_SYS(sysinfo), SCMP_SYS(getuid), SCMP_SYS(geteuid), SCMP_SYS(getgid),
        SCMP_SYS(getegid), SCMP_SYS(getrandom), SCMP_SYS(getrlimit),
    };
    int rc = 0;
    for (int nr : allowed)
        if (nr >= 0) rc |= seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 0);
    // Opening read-only is allowed (under bubblewrap only the sandbox's few files are there to see);
    // opening with any of the write flags fails with EACCES. The rules do not overlap.
    const scmp_datum_t write_flags = O_WRONLY | O_RDWR | O_CREAT | O_TRUNC | O_APPEND;
    rc |= seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(openat), 1, SCMP_A2(SCMP_CMP_MASKED_EQ, write_flags, 0));
    if (SCMP_SYS(open) >= 0)
        rc |= seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(open), 1, SCMP_A1(SCMP_CMP_MASKED_EQ, write_flags, 0));
    for (scmp_datum_t bit : {scmp_datum_t(O_WRONLY), scmp_datum_t(O_RDWR), scmp_datum_t(O_CREAT),
                             scmp_datum_t(O_TRUNC), scmp_datum_t(O_APPEND)}) {
        rc |= seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EACCES), SCMP_SYS(openat), 1, SCMP_A2(SCMP_CMP_MASKED_EQ, bit, bit));
        if (SCMP_SYS(open) >= 0)
            rc |= seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EACCES), SCMP_SYS(open), 1, SCMP_A1(SCMP_CMP_MASKED_EQ, bit, bit));
    }
    if (SCMP_SYS(creat) >= 0) rc |= seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EACCES), SCMP_SYS(creat), 0);
    rc |= seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(openat2), 0);
    // No clone, no clone3: neither processes nor threads (the pool's threads exist already). Both
    // fall to the default action, SIGSYS.
    // fcntl: the descriptor flags, the status flags without O_ASYNC, dup. Not F_SETOWN(_EX), F_SETSIG
    // or O_ASYNC (signal-driven I/O: the kernel would signal, even SIGKILL, a process of the module's
    // choosing), nor leases, directory notifications, locks, pipe sizes or seals.
    for (int cmd : {F_GETFD, F_SETFD, F_GETFL, F_DUPFD, F_DUPFD_CLOEXEC})
        rc |= seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(fcntl), 1, SCMP_A1(SCMP_CMP_EQ, scmp_datum_t(cmd)));
    rc |= seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(fcntl), 2, SCMP_A1(SCMP_CMP_EQ, scmp_datum_t(F_SETFL)),
                           SCMP_A2(SCMP_CMP_MASKED_EQ, scmp_datum_t(O_ASYNC), 0));
    // Signals to itself only (abort(), raise()); tkill, rt_sigqueueinfo, pidfd_send_signal are refused.
    pid_t self = getpid();
    rc |= seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(kill), 1, SCMP_A0(SCMP_CMP_EQ, scmp_datum_t(self)));
    rc |= seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(tgkill), 1, SCMP_A0(SCMP_CMP_EQ, scmp_datum_t(self)));
    // Reading limits is fine; changing them is not.
    rc |= seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(prlimit64), 2, SCMP_A0(SCMP_CMP_EQ, 0),
                           SCMP_A2(SCMP_CMP_EQ, 0));
    rc |= seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(setrlimit), 0);
    // Terminal queries of stdio (isatty): not a terminal.
    rc |= seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOTTY), SCMP_SYS(ioctl), 0);
    if (rc != 0) {
        why = std::string("building the seccomp filter failed: ") + strerror(-rc);
        seccomp_release(ctx);
        return false;
    }
    int lr = seccomp_load(ctx);
    seccomp_release(ctx);
    if (lr != 0) {
        why = std::string("loading the seccomp filter failed: ") + strerror(-lr);
        return false;
    }
    return true;
}
#else
bool install_seccomp(std::string &why) {
    why = "the executor was built without libseccomp (install libseccomp-dev)";
    return false;
}
#endif

// ---- serve ------------------------------------------------------------------------------------------

struct Module {
    sg_abi_version_fn abi_version;
    sg_kernel_count_fn kernel_count;
    sg_kernel_name_fn kernel_name;
    sg_kernel_defined_fn kernel_defined;
    sg_kernel_arity_fn kernel_arity;
    sg_trim_fn trim;
    sg_take_output_fn take_output;
    sg_findings_fn findings;
    sg_launch_fn launch;
    sg_profile_set_fn profile_set = nullptr;    // optional (modules built before the profile)
    sg_profile_take_fn profile_take = nullptr;
    void *lib = nullptr;  // the dlopen handle
};

template <class F> bool bind(void *lib, const char *name, F *out) {
    *out = reinterpret_cast<F>(dlsym(lib, name));
    return *out != nullptr;
}

// LAUNCH payload: grid[3], block[3] (uint32), dyn_shared, shared_limit (uint64), workers, schedule
// (int32), seed (uint64), checks, detect_deadlock (int32), shared_fill, interleave (uint32),
// sample_mode, nsample (int32), SG_MAX_SAMPLE sampled blocks (uint64), nallocs, nargs
// (int32), kernel name length (uint32) and name, nallocs x {base, size, lo, count (uint64), elem (uint32), name (32 bytes)}, nargs x {kind (int32: 0 pointer, 1 int),
// value (int64)}.
// LAUNCHED payload: sg_result (raw), findings length (int64) and text, output code (int64: n, or
// -1 - n when cut) and the n bytes of output.
void handle_launch(const Module &M, const std::string &req) {
    Reader r{req.data(), req.data() + req.size()};
    sg_launch_config cfg;
    memset(&cfg, 0, sizeof cfg);
    for (unsigned &g : cfg.grid) g = r.get<uint32_t>();
    for (unsigned &b : cfg.block) b = r.get<uint32_t>();
    cfg.dyn_shared = r.get<uint64_t>();
    cfg.shared_limit = r.get<uint64_t>();
    cfg.workers = r.get<int32_t>();
    cfg.schedule = r.get<int32_t>();
    cfg.seed = r.get<uint64_t>();
    cfg.checks = r.get<int32_t>();
    cfg.detect_deadlock = r.get<int32_t>();
    cfg.shared_fill = r.get<uint32_t>();
    cfg.interleave = r.get<uint32_t>();
    cfg.sample_mode = r.get<int32_t>();
    cfg.nsample = r.get<int32_t>();
    for (uint64_t &b : cfg.sample) b = r.get<uint64_t>();
    int32_t nallocs = r.get<int32_t>();
    int32_t nargs = r.get<int32_t>();
    uint32_t name_len = r.get<uint32_t>();
    const char *name = r.take(name_len);
    sg_result res;
    memset(&res, 0, sizeof res);
    std::string kernel(name ? name : "", name ? name_len : 0);
    std::vector<sg_alloc> allocs;
    union Slot {
        void *ptr;
        int32_t i32;
    };
    std::vector<Slot> slots;
    std::vector<void *> argv;
    if (r.ok && nallocs >= 0 && nargs >= 0 && nargs <= 64 && size_t(nallocs) <= req.size() / 68) {
        allocs.resize(size_t(nallocs));
        for (sg_alloc &a : allocs) {
            a.base = r.get<uint64_t>(), a.size = r.get<uint64_t>(), a.lo = r.get<uint64_t>();
            a.count = r.get<uint64_t>(), a.elem = r.get<uint32_t>();
            const char *nm = r.take(32);
            memset(a.name, 0, sizeof a.name);
            if (nm) memcpy(a.name, nm, sizeof a.name - 1);
        }
        slots.resize(size_t(nargs));
        for (Slot &s : slots) {
            int32_t kind = r.get<int32_t>();
            int64_t value = r.get<int64_t>();
            if (kind == 0)
                s.ptr = reinterpret_cast<void *>(uintptr_t(value));
            else
                s.i32 = int32_t(value);
        }
    } else {
        r.ok = false;
    }
    if (!r.ok) {
        snprintf(res.kind, sizeof res.kind, "protocol");
        snprintf(res.message, sizeof res.message, "malformed launch request");
        res.status = SG_LAUNCH_ERROR;
    } else {
        for (Slot &s : slots) argv.push_back(&s);
        cfg.kernel = kernel.c_str();
        cfg.allocs = allocs.data();
        cfg.nallocs = int(allocs.size());
        M.launch(&cfg, argv.empty() ? nullptr : argv.data(), int(argv.size()), &res);  // the status is in res
    }
    Writer w;
    w.bytes(&res, sizeof res);
    std::string findings;
    if (res.nfindings > 0) {
        findings.resize(size_t(kFindingsCap));
        long n = M.findings(&findings[0], kFindingsCap);
        findings.resize(size_t(n < 0 ? 0 : n >= kFindingsCap ? kFindingsCap - 1 : n));
    }
    w.put<int64_t>(int64_t(findings.size()));
    w.bytes(findings.data(), findings.size());
    std::string out(size_t(kOutputCap), '\0');
    long code = M.take_output(&out[0], kOutputCap);
    long len = code < 0 ? -1 - code : code;
    w.put<int64_t>(int64_t(code));
    w.bytes(out.data(), size_t(len));
    if (!send_frame(REP_LAUNCHED, w.buf)) _exit(0);
}

// PROFILE payload: on (int32), max_blocks (uint64). PROFILE reply: the totals since the last request
// (sg_profile_take's text), then the profile is set as asked.
void handle_profile(const Module &M, const std::string &req) {
    Reader r{req.data(), req.data() + req.size()};
    int32_t on = r.get<int32_t>();
    uint64_t max_blocks = r.get<uint64_t>();
    std::string text;
    if (M.profile_take) {
        text.resize(size_t(kFindingsCap));
        long n = M.profile_take(&text[0], kFindingsCap);
        text.resize(size_t(n < 0 ? 0 : n >= kFindingsCap ? kFindingsCap - 1 : n));
    }
    if (M.profile_set && r.ok) M.profile_set(on, max_blocks);
    if (!send_frame(REP_PROFILE, text)) _exit(0);
}

// ---- fresh globals -----------------------------------------------------------------------------------
// A kernel's __device__ variables (and every other static of the student's translation unit) keep
// their values from one launch to the next, as on a GPU. The grader grades a case from runs that must
// each behave as the case's checked run did (docs/security.md, "The checked run and the graded run"):
// a kernel that counts its launches in a __device__ variable must see the same count in both. So the
// grader sends, once and before any launch, the byte ranges of the module's writable data that the
// student's object contributed (build.py reads them from the link map: the runtime's own data is not
// among them), as offsets from the module's load address; the executor copies them (SNAPSHOT), and
// copies them back before each graded run (RESTORE). A range outside the module's writable segments
// (or inside its RELRO part, read-only after relocation) refuses the whole request.
//
// GLOBALS payload: op (int32: 0 snapshot, 1 restore), count (int32), count x {offset, size (uint64)}
// (snapshot only). GLOBALS reply: status (int32: 0 done, 1 refused), then the reason's text.
struct Saved {
    std::vector<std::pair<uintptr_t, size_t>> ranges;  // absolute addresses
    std::vector<char> bytes;
    bool taken = false;
};
Saved g_saved;
bool g_launched = false;  // a launch ran: a snapshot now would not be the module as loaded

struct Writable {
    uintptr_t base = 0;
    const char *name = nullptr;
    std::vector<std::pair<uintptr_t, uintptr_t>> rw, relro;  // [lo, hi) of PF_W PT_LOADs, PT_GNU_RELRO
};

int find_writable(struct dl_phdr_info *info, size_t, void *data) {
    Writable *w = static_cast<Writable *>(data);
    if (info->dlpi_addr != w->base || !info->dlpi_name || strcmp(info->dlpi_name, w->name) != 0) return 0;
    for (int i = 0; i < info->dlpi_phnum; ++i) {
        const ElfW(Phdr) &ph = info->dlpi_phdr[i];
        uintptr_t lo = info->dlpi_addr + ph.p_vaddr, hi = lo + ph.p_memsz;
        if (ph.p_type == PT_LOAD && (ph.p_flags & PF_W)) w->rw.emplace_back(lo, hi);
        if (ph.p_type == PT_GNU_RELRO) w->relro.emplace_back(lo, hi);
    }
    return 1;
}

std::string take_snapshot(const Module &M, Reader &r) {
    if (g_saved.taken) return "the snapshot was taken already";
    if (g_launched) return "a launch ran before the snapshot";
    struct link_map *lm = nullptr;
    if (dlinfo(M.lib, RTLD_DI_LINKMAP, &lm) != 0 || !lm) return "the module's load address is unknown";
    Writable w;
    w.base = lm->l_addr, w.name = lm->l_name;
    if (!dl_iterate_phdr(find_writable, &w)) return "the module's segments are not found";
    int32_t n = r.get<int32_t>();
    if (!r.ok || n < 0 || n > 65536) return "malformed globals request";
    std::vector<std::pair<uintptr_t, size_t>> ranges;
    size_t total = 0;
    for (int32_t i = 0; i < n; ++i) {
        uint64_t off = r.get<uint64_t>(), size = r.get<uint64_t>();
        if (!r.ok) return "malformed globals request";
        uintptr_t lo = w.base + off, hi = lo + size;
        if (size == 0) continue;
        if (hi < lo || size > (1u << 30)) return "a range of the module's data is too large";
        bool inside = false;
        for (auto &s : w.rw) inside |= lo >= s.first && hi <= s.second;
        for (auto &s : w.relro) inside &= hi <= s.first || lo >= s.second;
        if (!inside) return "a range is not in the module's writable data";
        ranges.emplace_back(lo, size_t(size));
        total += size_t(size);
    }
    g_saved.bytes.resize(total);
    size_t at = 0;
    for (auto &rg : ranges) {
        memcpy(g_saved.bytes.data() + at, reinterpret_cast<const void *>(rg.first), rg.second);
        at += rg.second;
    }
    g_saved.ranges = std::move(ranges);
    g_saved.taken = true;
    return "";
}

void handle_globals(const Module &M, const std::string &req) {
    Reader r{req.data(), req.data() + req.size()};
    int32_t op = r.get<int32_t>();
    std::string why;
    if (!r.ok) {
        why = "malformed globals request";
    } else if (op == 0) {
        why = take_snapshot(M, r);
    } else if (op == 1) {
        if (!g_saved.taken) {
            why = "no snapshot was taken";
        } else {
            size_t at = 0;
            for (auto &rg : g_saved.ranges) {
                memcpy(reinterpret_cast<void *>(rg.first), g_saved.bytes.data() + at, rg.second);
                at += rg.second;
            }
        }
    } else {
        why = "unknown globals operation";
    }
    Writer w;
    w.put<int32_t>(why.empty() ? 0 : 1);
    w.bytes(why.data(), why.size());
    if (!send_frame(REP_GLOBALS, w.buf)) _exit(0);
}

// What `executor serve` is told on its command line.
struct ServeOptions {
    unsigned long long sock = ~0ull, memfd = ~0ull, arena = 0, arena_size = 0, parent = 0, seccomp = 1;
    const char *module = nullptr;
    Limits limits;
};

// Reads serve's options (argv[2...]) into o; whether they are complete and well formed.
bool parse_serve_options(int argc, char **argv, ServeOptions &o) {
    bool bad = false;
    for (int i = 2; i < argc && !bad;) {
        if (limit_option(argv, argc, &i, o.limits, &bad)) continue;
        const char *opt = argv[i];
        if (!strcmp(opt, "--arena") && i + 2 < argc) {
            bad |= !parse_u64(argv[i + 1], &o.arena) || !parse_u64(argv[i + 2], &o.arena_size);
            i += 3;
            continue;
        }
        if (i + 1 >= argc) return false;
        const char *val = argv[i + 1];
        if (!strcmp(opt, "--socket")) bad |= !parse_u64(val, &o.sock);
        else if (!strcmp(opt, "--memfd")) bad |= !parse_u64(val, &o.memfd);
        else if (!strcmp(opt, "--parent")) bad |= !parse_u64(val, &o.parent);
        else if (!strcmp(opt, "--seccomp")) bad |= !parse_u64(val, &o.seccomp);
        else if (!strcmp(opt, "--module")) o.module = val;
        else bad = true;
        i += 2;
    }
    return !bad && o.sock <= 1u << 20 && o.memfd <= 1u << 20 && o.arena && o.arena_size && o.module;
}

// Device memory at the grader's address: device pointers are the same numbers in both. The memfd is
// closed after (the mapping stays; the module cannot resize the memory through the fd).
void map_device_memory(const ServeOptions &o) {
    void *want = reinterpret_cast<void *>(uintptr_t(o.arena));
    void *got = mmap(want, size_t(o.arena_size), PROT_READ | PROT_WRITE,
                     MAP_SHARED | MAP_FIXED_NOREPLACE | MAP_NORESERVE, int(o.memfd), 0);
    if (got != want) {
        char at[32];
        snprintf(at, sizeof at, "%#llx", o.arena);
        std::string why = std::string("cannot map device memory at the grader's address ") + at + ": " +
                          (got == MAP_FAILED ? strerror(errno) : "the kernel chose another address");
        if (got != MAP_FAILED) munmap(got, size_t(o.arena_size));
        hello_failed(why);
    }
    close(int(o.memfd));
}

// Loads the module (only now does student code run: its static constructors, inside dlopen) and
// binds the runtime's C ABI in it.
Module load_module(const char *module) {
    void *lib = dlopen(module, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *e = dlerror();
        hello_failed(std::string("cannot load the module: ") + (e ? e : "unknown error"));
    }
    Module M;
    M.lib = lib;
    if (!bind(lib, "sg_abi_version", &M.abi_version) || !bind(lib, "sg_kernel_count", &M.kernel_count) ||
        !bind(lib, "sg_kernel_name", &M.kernel_name) || !bind(lib, "sg_kernel_defined", &M.kernel_defined) ||
        !bind(lib, "sg_kernel_arity", &M.kernel_arity) || !bind(lib, "sg_trim", &M.trim) ||
        !bind(lib, "sg_take_output", &M.take_output) || !bind(lib, "sg_findings", &M.findings) ||
        !bind(lib, "sg_launch", &M.launch))
        hello_failed("the module does not export the emulator runtime's functions");
    sg_set_thread_pool_fn set_pool = nullptr;
    if (bind(lib, "sg_set_thread_pool", &set_pool)) set_pool(&kPool);
    bind(lib, "sg_profile_set", &M.profile_set), bind(lib, "sg_profile_take", &M.profile_take);
    return M;
}

// HELLO: the protocol and ABI versions, whether seccomp is on, sg_result's size, and the module's
// kernels (one a line: name, defined, arity). Whether it was sent.
bool send_hello(const Module &M, int seccomp_on) {
    Writer hello;
    hello.put<int32_t>(0), hello.put<int32_t>(int32_t(SG_EXECUTOR_PROTOCOL)), hello.put<int32_t>(M.abi_version());
    hello.put<int32_t>(seccomp_on), hello.put<int32_t>(int32_t(sizeof(sg_result)));
    for (int k = 0, n = M.kernel_count(); k < n && k < 256; ++k) {
        const char *kn = M.kernel_name(k);
        if (!kn) continue;
        std::string line = std::string(kn) + "\t" + std::to_string(M.kernel_defined(kn)) + "\t" +
                           std::to_string(M.kernel_arity(kn)) + "\n";
        hello.bytes(line.data(), line.size());
    }
    return send_frame(REP_HELLO, hello.buf);
}

// Answers the grader's requests until it closes the socket (0), or sends one too large or unknown (3).
int serve_requests(const Module &M) {
    std::string req;
    for (;;) {
        uint32_t head[2];
        if (!read_all(g_sock, head, sizeof head)) return 0;  // the grader closed the socket: done
        if (head[0] > kMaxRequest) return 3;
        req.resize(head[0]);
        if (head[0] && !read_all(g_sock, &req[0], head[0])) return 0;
        if (head[1] == REQ_LAUNCH) {
            g_launched = true;
            handle_launch(M, req);
        } else if (head[1] == REQ_GLOBALS) {
            handle_globals(M, req);
        } else if (head[1] == REQ_PROFILE) {
            handle_profile(M, req);
        } else if (head[1] == REQ_TRIM) {
            M.trim();
            if (!send_frame(REP_TRIMMED, std::string())) return 0;
        } else {
            return 3;
        }
    }
}

int serve(int argc, char **argv) {
    ServeOptions o;
    if (!parse_serve_options(argc, argv, o)) {
        fprintf(stderr, "executor: usage: executor serve --socket FD --memfd FD --arena ADDR SIZE --module PATH\n");
        return 2;
    }
    g_sock = int(o.sock);
    // Die with the grader, even without bubblewrap's --die-with-parent.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (o.parent && getppid() != pid_t(o.parent)) _exit(1);
    signal(SIGPIPE, SIG_IGN);
    fcntl(g_sock, F_SETFD, FD_CLOEXEC);
    fcntl(int(o.memfd), F_SETFD, FD_CLOEXEC);
    map_device_memory(o);
    std::string why;
    if (!apply_limits(o.limits, why)) hello_failed(why);
    if (!start_pool(o.limits.threads > 1 ? std::min(o.limits.threads, 64ull) - 1 : 0, why)) hello_failed(why);
    g_threads_closed.store(true);
    int seccomp_on = 0;
    if (o.seccomp) {
        if (!install_seccomp(why)) hello_failed(why);
        seccomp_on = 1;
    }
    Module M = load_module(o.module);
    if (!send_hello(M, seccomp_on)) return 0;
    return serve_requests(M);
}

// ---- limit, probe -------------------------------------------------------------------------------------

int limit(int argc, char **argv) {
    Limits L;
    bool bad = false;
    int i = 2;
    while (i < argc && !bad && strcmp(argv[i], "--")) {
        if (!limit_option(argv, argc, &i, L, &bad)) bad = true;
    }
    if (bad || i + 1 >= argc) {
        fprintf(stderr, "executor: usage: executor limit [--as B] [--fsize B] [--nofile N] [--cpu S] -- COMMAND...\n");
        return 2;
    }
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    std::string why;
    if (!apply_limits(L, why)) {
        fprintf(stderr, "executor: %s\n", why.c_str());
        return 2;
    }
    execvp(argv[i + 1], argv + i + 1);
    fprintf(stderr, "executor: cannot run %s: %s\n", argv[i + 1], strerror(errno));
    return 127;
}

// Exit status kViolationExit: the filter is installed and stops fork() (the grader checks this once
// per process, for describe()); 1 with a message on stderr: it cannot be installed.
int probe() {
    std::string why;
    if (!install_seccomp(why)) {
        fprintf(stderr, "%s\n", why.c_str());
        return 1;
    }
    pid_t pid = fork();  // the filter's SIGSYS handler exits with kViolationExit before fork runs
    if (pid == 0) _exit(0);
    fprintf(stderr, "the seccomp filter did not stop fork()\n");
    return 1;
}

}  // namespace

int main(int argc, char **argv) {
    if (argc >= 2 && !strcmp(argv[1], "serve")) return serve(argc, argv);
    if (argc >= 2 && !strcmp(argv[1], "limit")) return limit(argc, argv);
    if (argc >= 2 && !strcmp(argv[1], "probe")) return probe();
    fprintf(stderr, "executor: usage: executor serve|limit|probe ... (run by scangrade's emulator backend)\n");
    return 2;
}
