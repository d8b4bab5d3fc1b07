// scangrade CPU emulator runtime: runs CUDA kernels on the CPU, CUDA threads as fibers.
//
// Compiled once per (sources, flags, compiler) into an object file and linked into every emulated
// module, with hidden visibility except the sg_* C ABI below, which Python calls through ctypes.
//
// Execution model
//   * A launch spreads its blocks over `workers` OS threads (the caller is worker 0); each worker
//     takes the next block index from an atomic counter and owns a pool of fibers, one per thread
//     of a block, and a shared-memory arena. Pools persist across launches (sg_trim frees them).
//   * A block runs in rounds. In each round every live thread runs, in the order the schedule
//     gives, until it reaches a barrier or returns; a thread's barrier switches directly to the
//     next thread of the round (the last one switches back to the scheduler). When the round ends
//     every live thread is at a barrier (exited threads count as arrived), so the barrier releases.
//   * Errors (assert, trap, shared-memory limit, unsupported features, and faults: a bad address,
//     a stack overflow into a fiber's guard page, an integer division by zero) end the thread's
//     fiber by switching away for good; the block stops, and the launch reports the failure of the
//     lowest block index that failed (deterministic for a deterministic schedule).
//   * The runtime never times out: the grader runs emulated code in a child process it can kill.

#include "sg_abi.h"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <thread>
#include <vector>

#if !defined(__x86_64__) || defined(SG_USE_UCONTEXT)
#define SG_UCONTEXT 1
#include <ucontext.h>
#endif

#define SG_EXPORT extern "C" __attribute__((visibility("default")))

// ---------------------------------------------------------------------------------------------
// The C ABI structures (mirrored by ctypes in backend.py; keep in sync, bump SG_ABI_VERSION).
// ---------------------------------------------------------------------------------------------
#define SG_ABI_VERSION 1

struct sg_launch_config {
    const char *kernel;
    unsigned int grid[3];
    unsigned int block[3];
    uint64_t dyn_shared;    // dynamic shared memory, bytes
    uint64_t shared_limit;  // static + dynamic limit per block, bytes
    int workers;            // OS threads (>= 1)
    int schedule;           // 0: ascending linear thread id
};

enum { SG_OK = 0, SG_KERNEL_ERROR = 1, SG_LAUNCH_ERROR = 2, SG_INTERNAL_ERROR = 3 };

struct sg_result {
    int status;             // SG_OK, SG_KERNEL_ERROR, SG_LAUNCH_ERROR, SG_INTERNAL_ERROR
    int has_ids;            // block/thread below are meaningful
    unsigned int block[3];
    unsigned int thread[3];
    char kind[32];
    char message[2048];
};

namespace sg {
namespace {

// ---------------------------------------------------------------------------------------------
// Contexts: a hand-written x86-64 switch (callee-saved registers + stack pointer), or ucontext.
// ---------------------------------------------------------------------------------------------
#ifndef SG_UCONTEXT
struct Context {
    void *sp = nullptr;
};

extern "C" void __sg_switch(void **save_sp, void *new_sp) __attribute__((visibility("hidden")));
extern "C" void __sg_fiber_start() __attribute__((visibility("hidden")));

// __sg_switch: push the callee-saved registers, save rsp into *save_sp, load new_sp, pop, return.
// __sg_fiber_start: first "return" target of a fresh fiber; calls r13(r12) and never returns.
asm(R"(
    .text
    .p2align 4
    .globl __sg_switch
    .hidden __sg_switch
    .type __sg_switch, @function
__sg_switch:
    .cfi_startproc
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .cfi_endproc
    .size __sg_switch, .-__sg_switch

    .p2align 4
    .globl __sg_fiber_start
    .hidden __sg_fiber_start
    .type __sg_fiber_start, @function
__sg_fiber_start:
    .cfi_startproc
    .cfi_undefined rip
    movq %r12, %rdi
    callq *%r13
    ud2
    .cfi_endproc
    .size __sg_fiber_start, .-__sg_fiber_start
)");

inline void switch_to(Context *from, Context *to) { __sg_switch(&from->sp, to->sp); }

// Prepare `cx` so that switching to it calls entry(arg) on the stack ending at `top`.
inline void prepare(Context *cx, char *stack_lo, char *top, void (*entry)(void *), void *arg) {
    (void)stack_lo;
    uintptr_t t = reinterpret_cast<uintptr_t>(top) & ~uintptr_t(15);
    void **sp = reinterpret_cast<void **>(t - 72);  // 8 mod 16: after popping 6 regs + ret, rsp is 16-aligned
    sp[0] = nullptr;                                 // r15
    sp[1] = nullptr;                                 // r14
    sp[2] = reinterpret_cast<void *>(entry);        // r13
    sp[3] = arg;                                     // r12
    sp[4] = nullptr;                                 // rbx
    sp[5] = nullptr;                                 // rbp
    sp[6] = reinterpret_cast<void *>(&__sg_fiber_start);
    sp[7] = nullptr;
    sp[8] = nullptr;
    cx->sp = sp;
}
#else
struct Context {
    ucontext_t uc;
};

inline void switch_to(Context *from, Context *to) { swapcontext(&from->uc, &to->uc); }

void ucontext_entry(unsigned int hi, unsigned int lo, unsigned int ehi, unsigned int elo) {
    void *arg = reinterpret_cast<void *>((uintptr_t(hi) << 32) | lo);
    auto entry = reinterpret_cast<void (*)(void *)>((uintptr_t(ehi) << 32) | elo);
    entry(arg);
    abort();
}

inline void prepare(Context *cx, char *stack_lo, char *top, void (*entry)(void *), void *arg) {
    getcontext(&cx->uc);
    cx->uc.uc_stack.ss_sp = stack_lo;
    cx->uc.uc_stack.ss_size = size_t(top - stack_lo) & ~size_t(15);
    cx->uc.uc_link = nullptr;
    uintptr_t a = reinterpret_cast<uintptr_t>(arg), e = reinterpret_cast<uintptr_t>(entry);
    makecontext(&cx->uc, reinterpret_cast<void (*)()>(&ucontext_entry), 4, unsigned(a >> 32), unsigned(a),
                unsigned(e >> 32), unsigned(e));
}
#endif

// ---------------------------------------------------------------------------------------------
// Kernel registry (filled by static initialisers appended to the emulated file).
// ---------------------------------------------------------------------------------------------
struct Kernel {
    const char *name;
    void *fn;  // null when the contract kernel is not defined (weak reference)
    __sg_invoke_fn invoke;
    int nargs;
};

constexpr int kMaxKernels = 64;
Kernel g_kernels[kMaxKernels];
int g_nkernels = 0;

const Kernel *find_kernel(const char *name) {
    for (int i = 0; i < g_nkernels; ++i)
        if (std::strcmp(g_kernels[i].name, name) == 0) return &g_kernels[i];
    return nullptr;
}

// ---------------------------------------------------------------------------------------------
// Schedules: the order in which the live threads of a block run in each round (between two
// barriers). The round list is compacted in place, so a policy that orders the first round only
// keeps that order; arrange() may also reorder every round. Policies are selected by
// sg_launch_config.schedule; only 0 (ascending linear thread id) exists so far.
// ---------------------------------------------------------------------------------------------
enum Schedule : int { kAscending = 0, kScheduleCount };

inline void arrange(int schedule, unsigned *ids, unsigned n, uint64_t block, unsigned round) {
    (void)ids, (void)n, (void)block, (void)round;
    switch (schedule) {
        case kAscending:
        default:
            break;  // ids are already ascending
    }
}

// ---------------------------------------------------------------------------------------------
// Launch, worker, fiber.
// ---------------------------------------------------------------------------------------------
constexpr size_t kStack = __SG_STACK_SIZE;
constexpr size_t kHeader = __SG_HEADER_SIZE;
constexpr unsigned kMaxThreads = 1024;
constexpr unsigned char kPoison = 0xA5;
constexpr size_t kAltStack = 64 * 1024;

enum FiberState : unsigned char { kRunnable, kDone };

struct Worker;

struct Fiber {
    Context cx;
    __sg_ThreadCtx *hdr = nullptr;  // top of this fiber's stack region
    char *stack_lo = nullptr;       // lowest usable byte (just above the guard page)
    Worker *worker = nullptr;
    unsigned linear = 0;
    FiberState state = kDone;
};

// Fixed-size, so that a fault handler can fill it without allocating.
struct ErrorRecord {
    bool set = false;
    uint64_t block_linear = 0;
    bool has_ids = false;
    uint3 block{0, 0, 0};
    uint3 thread{0, 0, 0};
    char kind[32] = {0};
    char message[1536] = {0};
};

struct Launch {
    const Kernel *kernel = nullptr;
    void *const *args = nullptr;
    dim3 grid, block;
    uint64_t nblocks = 0;
    unsigned nthreads = 0;
    size_t dyn_shared = 0;
    size_t shared_limit = 0;
    int schedule = 0;
    std::atomic<uint64_t> next_block{0};
    std::atomic<uint64_t> fail_block{UINT64_MAX};
    std::mutex mu;
    ErrorRecord error;

    void report(const ErrorRecord &rec) {
        std::lock_guard<std::mutex> lock(mu);
        if (!error.set || rec.block_linear < error.block_linear) {
            error = rec;
            error.set = true;
        }
        uint64_t cur = fail_block.load();
        while (error.block_linear < cur && !fail_block.compare_exchange_weak(cur, error.block_linear)) {
        }
    }
};

struct SlotState {
    uint64_t gen = 0;
    void *ptr = nullptr;
};

std::atomic<unsigned> g_next_slot_id{0};

size_t page_size() {
    static size_t p = size_t(sysconf(_SC_PAGESIZE));
    return p;
}

struct Chunk {
    char *base;
    size_t len;
};

struct Worker {
    // fibers: fibers[i] runs linear thread i of the current block
    Fiber fibers[kMaxThreads];
    unsigned nfibers = 0;
    std::vector<Chunk> chunks;

    Context sched;
    Launch *launch = nullptr;

    // the current block
    uint64_t block_linear = 0;
    unsigned order[kMaxThreads];
    unsigned order_len = 0;
    unsigned cursor = 0;
    Fiber *running = nullptr;  // the fiber executing now (null while the scheduler runs)
    bool failed = false;
    ErrorRecord error;

    // alternate signal stack: a fault on a fiber (stack overflow included) is handled on it
    char *altstack = nullptr;

    // barrier predicates (__syncthreads_count/and/or)
    int acc_count = 0, acc_and = 1, acc_or = 0;
    int rel_count = 0, rel_and = 1, rel_or = 0;

    // shared memory arena: [dynamic part][static slots...], guard page after arena_cap
    char *arena = nullptr;
    size_t arena_cap = 0;
    size_t arena_map_len = 0;
    size_t bump = 0;
    uint64_t gen = 0;
    std::vector<SlotState> slots;

    ~Worker() { trim(); }

    void trim() {
        for (Chunk &c : chunks) munmap(c.base, c.len);
        chunks.clear();
        nfibers = 0;
        if (arena) munmap(arena, arena_map_len);
        arena = nullptr;
        arena_cap = arena_map_len = 0;
        if (altstack) munmap(altstack, kAltStack);
        altstack = nullptr;
    }

    // Make at least n fibers, each on its own kStack-aligned region with a guard page at the bottom.
    bool ensure_fibers(unsigned n, std::string &why) {
        if (n <= nfibers) return true;
        unsigned extra = n - nfibers;
        size_t len = (size_t(extra) + 1) * kStack;
        void *m = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (m == MAP_FAILED) {
            why = std::string("cannot map fiber stacks: ") + std::strerror(errno);
            return false;
        }
        char *raw = static_cast<char *>(m);
        char *base = reinterpret_cast<char *>((reinterpret_cast<uintptr_t>(raw) + kStack - 1) & ~(kStack - 1));
        if (base > raw) munmap(raw, size_t(base - raw));
        char *end = base + size_t(extra) * kStack;
        char *raw_end = raw + len;
        if (raw_end > end) munmap(end, size_t(raw_end - end));
        chunks.push_back(Chunk{base, size_t(extra) * kStack});
        for (unsigned i = 0; i < extra; ++i) {
            char *region = base + size_t(i) * kStack;
            if (mprotect(region, page_size(), PROT_NONE) != 0) {
                why = std::string("cannot protect a fiber stack guard page: ") + std::strerror(errno);
                return false;
            }
            Fiber &f = fibers[nfibers + i];
            f.hdr = reinterpret_cast<__sg_ThreadCtx *>(region + kStack - kHeader);
            f.hdr->fiber = &f;
            f.stack_lo = region + page_size();
            f.worker = this;
        }
        nfibers = n;
        return true;
    }

    bool ensure_arena(size_t cap, std::string &why) {
        if (arena && arena_cap >= cap) return true;
        if (arena) munmap(arena, arena_map_len);
        size_t ps = page_size();
        size_t rounded = (cap + ps - 1) / ps * ps;
        // Place the arena so that it ends exactly at the guard page: overruns past the limit fault.
        size_t len = rounded + ps;
        void *m = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED) {
            why = std::string("cannot map the shared-memory arena: ") + std::strerror(errno);
            arena = nullptr;
            return false;
        }
        mprotect(static_cast<char *>(m) + rounded, ps, PROT_NONE);
        arena = static_cast<char *>(m);
        arena_cap = rounded;
        arena_map_len = len;
        return true;
    }

    void run(Launch *L);
    void run_block(uint64_t b);
    [[noreturn]] void fail(Fiber *f, const char *kind, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
    Fiber *fiber_owning(uintptr_t addr, bool *in_guard) const;
    void next_in_round(Fiber *from);
};

// Formats like printf into a std::string.
std::string format(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
std::string format(const char *fmt, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = std::vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n < 0) return std::string();
    if (size_t(n) < sizeof buf) return std::string(buf, size_t(n));
    std::string s(size_t(n) + 1, '\0');
    va_start(ap, fmt);
    std::vsnprintf(&s[0], s.size(), fmt, ap);
    va_end(ap);
    s.resize(size_t(n));
    return s;
}

inline Fiber *current_fiber() { return static_cast<Fiber *>(__sg_self()->fiber); }

// Entry point of every emulated thread.
void fiber_main(void *arg) {
    Fiber *f = static_cast<Fiber *>(arg);
    Worker *w = f->worker;
    const Kernel *k = w->launch->kernel;
    k->invoke(k->fn, w->launch->args);
    f->state = kDone;
    w->next_in_round(f);
    __builtin_unreachable();
}

// Switch from `from` to the next thread of this round, or back to the scheduler.
inline void Worker::next_in_round(Fiber *from) {
    unsigned c = ++cursor;
    Fiber *next = c < order_len ? &fibers[order[c]] : nullptr;
    running = next;
    switch_to(&from->cx, next ? &next->cx : &sched);
}

void Worker::fail(Fiber *f, const char *kind, const char *fmt, ...) {
    if (!failed) {
        failed = true;
        error.set = true;
        error.block_linear = block_linear;
        error.has_ids = true;
        error.block = f->hdr->blockIdx;
        error.thread = f->hdr->threadIdx;
        std::snprintf(error.kind, sizeof error.kind, "%s", kind);
        va_list ap;
        va_start(ap, fmt);
        std::vsnprintf(error.message, sizeof error.message, fmt, ap);
        va_end(ap);
    }
    running = nullptr;
    // Leave this thread for good; the scheduler sees `failed` and abandons the block.
    switch_to(&f->cx, &sched);
    __builtin_unreachable();
}

void Worker::run_block(uint64_t b) {
    Launch *L = launch;
    block_linear = b;
    const dim3 g = L->grid, bd = L->block;
    uint3 bid{unsigned(b % g.x), unsigned((b / g.x) % g.y), unsigned(b / (uint64_t(g.x) * g.y))};
    const unsigned n = L->nthreads;

    // Shared memory: the dynamic part at offset 0 (poisoned), static slots allocated on first use.
    ++gen;
    if (L->dyn_shared) std::memset(arena, kPoison, L->dyn_shared);
    bump = (L->dyn_shared + 15) & ~size_t(15);
    acc_count = 0, acc_and = 1, acc_or = 0;
    rel_count = 0, rel_and = 1, rel_or = 0;

    for (unsigned t = 0; t < n; ++t) {
        Fiber &f = fibers[t];
        f.linear = t;
        f.state = kRunnable;
        __sg_ThreadCtx *h = f.hdr;
        h->threadIdx = uint3{t % bd.x, (t / bd.x) % bd.y, t / (bd.x * bd.y)};
        h->blockIdx = bid;
        h->blockDim = bd;
        h->gridDim = g;
        prepare(&f.cx, f.stack_lo, reinterpret_cast<char *>(h), &fiber_main, &f);
        order[t] = t;
    }
    order_len = n;

    for (unsigned round = 0;; ++round) {
        // Compact the round to the live threads, keeping their order; let the schedule arrange it.
        unsigned live = 0;
        for (unsigned i = 0; i < order_len; ++i)
            if (fibers[order[i]].state != kDone) order[live++] = order[i];
        order_len = live;
        if (live == 0) break;
        arrange(L->schedule, order, live, b, round);
        cursor = 0;
        running = &fibers[order[0]];
        switch_to(&sched, &running->cx);
        running = nullptr;
        if (failed) return;
        if (b > L->fail_block.load(std::memory_order_relaxed)) return;  // a lower block failed: stop
        // Every live thread is at a barrier: release it.
        rel_count = acc_count, rel_and = acc_and, rel_or = acc_or;
        acc_count = 0, acc_and = 1, acc_or = 0;
    }
}

Fiber *Worker::fiber_owning(uintptr_t addr, bool *in_guard) const {
    for (const Chunk &c : chunks) {
        uintptr_t base = reinterpret_cast<uintptr_t>(c.base);
        if (addr >= base && addr < base + c.len) {
            uintptr_t region = addr & ~(kStack - 1);
            *in_guard = addr - region < page_size();
            return static_cast<Fiber *>(reinterpret_cast<__sg_ThreadCtx *>(region + kStack - kHeader)->fiber);
        }
    }
    return nullptr;
}

// ---------------------------------------------------------------------------------------------
// Faults of emulated threads. During a launch SIGSEGV, SIGBUS, SIGFPE and SIGILL are caught; a
// fault while a fiber runs ends that thread like a failed assert (the block stops, the launch
// reports it with the thread's ids). Any other fault restores the previous handler and returns,
// so it happens again under that handler (Python's faulthandler, or the default action).
// ---------------------------------------------------------------------------------------------
thread_local Worker *tl_worker = nullptr;
constexpr int kFaultSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL};
constexpr int kNumFaultSignals = int(sizeof kFaultSignals / sizeof kFaultSignals[0]);
struct sigaction g_previous[kNumFaultSignals];

void restore_handler(int sig) {
    for (int i = 0; i < kNumFaultSignals; ++i)
        if (kFaultSignals[i] == sig) sigaction(sig, &g_previous[i], nullptr);
}

void on_fault(int sig, siginfo_t *si, void *) {
    Worker *w = tl_worker;
    Fiber *f = w ? w->running : nullptr;
    if (!f) {
        restore_handler(sig);
        return;
    }
    uintptr_t addr = reinterpret_cast<uintptr_t>(si->si_addr);
    if (sig == SIGSEGV || sig == SIGBUS) {
        bool guard = false;
        if (w->fiber_owning(addr, &guard) && guard)
            w->fail(f, "stack-overflow",
                    "the thread's stack overflowed (%zu KiB per emulated thread): a large local array or deep "
                    "recursion",
                    kStack / 1024);
        uintptr_t arena = reinterpret_cast<uintptr_t>(w->arena);
        if (w->arena && addr >= arena + w->arena_cap && addr < arena + w->arena_map_len)
            w->fail(f, "illegal-address",
                    "access %zu bytes past the end of the block's %zu bytes of shared memory",
                    size_t(addr - arena - w->launch->shared_limit), size_t(w->launch->shared_limit));
        w->fail(f, "illegal-address", "invalid memory access at address 0x%lx%s", (unsigned long)addr,
                addr < 65536 ? " (a null or small pointer)" : "");
    }
    if (sig == SIGFPE)
        w->fail(f, "division-by-zero", "integer division by zero (or INT_MIN / -1)");
    w->fail(f, "illegal-instruction",
            "illegal instruction (undefined behaviour, e.g. a non-void function without a return)");
}

void install_fault_handlers() {
    struct sigaction sa;
    std::memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = &on_fault;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < kNumFaultSignals; ++i) sigaction(kFaultSignals[i], &sa, &g_previous[i]);
}

void remove_fault_handlers() {
    for (int i = 0; i < kNumFaultSignals; ++i) sigaction(kFaultSignals[i], &g_previous[i], nullptr);
}

void Worker::run(Launch *L) {
    launch = L;
    stack_t previous;
    bool alt = false;
    if (!altstack) {
        void *m = mmap(nullptr, kAltStack, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        altstack = m == MAP_FAILED ? nullptr : static_cast<char *>(m);
    }
    if (altstack) {
        stack_t ss;
        ss.ss_sp = altstack;
        ss.ss_size = kAltStack;
        ss.ss_flags = 0;
        alt = sigaltstack(&ss, &previous) == 0;
    }
    tl_worker = this;
    for (;;) {
        uint64_t b = L->next_block.fetch_add(1);
        if (b >= L->nblocks || b > L->fail_block.load()) break;
        failed = false;
        run_block(b);
        if (failed) {
            L->report(error);
            failed = false;
        }
    }
    tl_worker = nullptr;
    if (alt) sigaltstack(&previous, nullptr);
    launch = nullptr;
}

std::mutex g_launch_mu;  // one launch at a time per module
std::vector<std::unique_ptr<Worker>> g_workers;

void copy_str(char *dst, size_t cap, const std::string &s) {
    size_t n = std::min(cap - 1, s.size());
    std::memcpy(dst, s.data(), n);
    dst[n] = '\0';
}

void set_result(sg_result *r, int status, const char *kind, const std::string &msg) {
    r->status = status;
    r->has_ids = 0;
    copy_str(r->kind, sizeof r->kind, kind);
    copy_str(r->message, sizeof r->message, msg);
}

Worker *current_worker() { return current_fiber()->worker; }

}  // namespace
}  // namespace sg

using namespace sg;

// ---------------------------------------------------------------------------------------------
// Device-side entry points (hidden; called by emulated code on a fiber).
// ---------------------------------------------------------------------------------------------
extern "C" {

int __sg_register_kernel(const char *name, void *fn, __sg_invoke_fn invoke, int nargs) {
    if (g_nkernels >= kMaxKernels) return -1;
    g_kernels[g_nkernels] = Kernel{name, fn, invoke, nargs};
    return g_nkernels++;
}

void *__sg_shared(__sg_slot *slot, size_t size, size_t align) {
    Fiber *f = current_fiber();
    Worker *w = f->worker;
    unsigned id = __atomic_load_n(&slot->id, __ATOMIC_ACQUIRE);
    if (id == 0) {
        unsigned fresh = g_next_slot_id.fetch_add(1) + 1;
        unsigned expected = 0;
        if (__atomic_compare_exchange_n(&slot->id, &expected, fresh, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
            id = fresh;
        else
            id = expected;
    }
    if (id >= w->slots.size()) w->slots.resize(size_t(id) * 2 + 8);
    SlotState &s = w->slots[id];
    if (s.gen == w->gen) return s.ptr;
    if (align == 0 || (align & (align - 1)) != 0) align = 16;
    size_t off = (w->bump + align - 1) & ~(align - 1);
    size_t limit = w->launch->shared_limit;
    if (size > limit || off + size > limit) {
        w->fail(f, "shared-memory-limit",
                "the block needs more shared memory than the limit of %zu bytes: __shared__ %s (%s:%d) "
                "needs %zu bytes, and %zu bytes (%zu of them dynamic) are already in use",
                limit, slot->name, slot->file, slot->line, size, w->bump, size_t(w->launch->dyn_shared));
    }
    s.gen = w->gen;
    s.ptr = w->arena + off;
    w->bump = off + size;
    std::memset(s.ptr, kPoison, size);
    return s.ptr;
}

void *__sg_dyn_shared(void) { return current_worker()->arena; }

void __syncthreads(void) {
    Fiber *f = current_fiber();
    f->worker->next_in_round(f);
}

int __syncthreads_count(int predicate) {
    Fiber *f = current_fiber();
    Worker *w = f->worker;
    w->acc_count += predicate != 0;
    w->next_in_round(f);
    return w->rel_count;
}

int __syncthreads_and(int predicate) {
    Fiber *f = current_fiber();
    Worker *w = f->worker;
    w->acc_and &= predicate != 0;
    w->next_in_round(f);
    return w->rel_and;
}

int __syncthreads_or(int predicate) {
    Fiber *f = current_fiber();
    Worker *w = f->worker;
    w->acc_or |= predicate != 0;
    w->next_in_round(f);
    return w->rel_or;
}

void __sg_trap(const char *file, int line, const char *func) {
    Fiber *f = current_fiber();
    f->worker->fail(f, "trap", "__trap() at %s:%d in %s", file, line, func);
}

void __sg_unsupported(const char *what, const char *file, int line) {
    Fiber *f = current_fiber();
    f->worker->fail(f, "unsupported",
                    "not supported by the emulator: %s (%s:%d); the emulator does not emulate warp-level "
                    "primitives yet",
                    what, file, line);
}

void __sg_assert_fail(const char *expr, const char *file, unsigned int line, const char *func) {
    Fiber *f = current_fiber();
    f->worker->fail(f, "assert", "device assertion `%s` failed at %s:%u in %s", expr, file, line, func);
}

#if defined(__GLIBC__)
// glibc's assert() calls this; the definition is hidden, so only this module's code binds to it.
__attribute__((noreturn, visibility("hidden"))) void __assert_fail(const char *expr, const char *file,
                                                                     unsigned int line, const char *func) {
    __sg_assert_fail(expr, file, line, func);
}
#endif

}  // extern "C"

// ---------------------------------------------------------------------------------------------
// The C ABI for Python.
// ---------------------------------------------------------------------------------------------
SG_EXPORT int sg_abi_version(void) { return SG_ABI_VERSION; }

SG_EXPORT int sg_kernel_count(void) { return g_nkernels; }

SG_EXPORT const char *sg_kernel_name(int i) { return i >= 0 && i < g_nkernels ? g_kernels[i].name : nullptr; }

// 1: defined; 0: declared by the contract but not defined; -1: unknown name.
SG_EXPORT int sg_kernel_defined(const char *name) {
    const Kernel *k = find_kernel(name);
    return k ? (k->fn != nullptr) : -1;
}

SG_EXPORT int sg_kernel_arity(const char *name) {
    const Kernel *k = find_kernel(name);
    return k ? k->nargs : -1;
}

// Frees every worker's fiber stacks and arena (they are re-created by the next launch).
SG_EXPORT void sg_trim(void) {
    std::lock_guard<std::mutex> lock(g_launch_mu);
    g_workers.clear();
}

SG_EXPORT int sg_launch(const sg_launch_config *cfg, void *const *args, int nargs, sg_result *res) {
    std::memset(res, 0, sizeof *res);
    const Kernel *k = find_kernel(cfg->kernel);
    if (!k || !k->fn) {
        set_result(res, SG_LAUNCH_ERROR, "unknown-kernel", format("the module has no kernel `%s`", cfg->kernel));
        return res->status;
    }
    if (nargs != k->nargs) {
        set_result(res, SG_LAUNCH_ERROR, "arguments",
                   format("kernel `%s` takes %d arguments, got %d", cfg->kernel, k->nargs, nargs));
        return res->status;
    }
    std::unique_ptr<Launch> L(new Launch());
    L->kernel = k;
    L->args = args;
    L->grid = dim3(cfg->grid[0], cfg->grid[1], cfg->grid[2]);
    L->block = dim3(cfg->block[0], cfg->block[1], cfg->block[2]);
    L->nblocks = uint64_t(L->grid.x) * L->grid.y * L->grid.z;
    uint64_t nthreads = uint64_t(L->block.x) * L->block.y * L->block.z;
    L->dyn_shared = size_t(cfg->dyn_shared);
    L->shared_limit = size_t(cfg->shared_limit);
    L->schedule = cfg->schedule;
    if (L->nblocks == 0 || nthreads == 0 || nthreads > kMaxThreads) {
        set_result(res, SG_LAUNCH_ERROR, "configuration",
                   format("invalid launch of `%s`: %llu blocks of %llu threads", cfg->kernel,
                          (unsigned long long)L->nblocks, (unsigned long long)nthreads));
        return res->status;
    }
    L->nthreads = unsigned(nthreads);
    if (L->dyn_shared > L->shared_limit) {
        set_result(res, SG_KERNEL_ERROR, "shared-memory-limit",
                   format("launch of `%s`: %zu bytes of dynamic shared memory exceed the limit of %zu bytes",
                          cfg->kernel, L->dyn_shared, L->shared_limit));
        return res->status;
    }
    if (cfg->schedule < 0 || cfg->schedule >= kScheduleCount) {
        set_result(res, SG_LAUNCH_ERROR, "configuration", format("unknown schedule %d", cfg->schedule));
        return res->status;
    }

    std::lock_guard<std::mutex> lock(g_launch_mu);
    uint64_t want = std::max(1, cfg->workers);
    unsigned nworkers = unsigned(std::min<uint64_t>(want, L->nblocks));
    while (g_workers.size() < nworkers) g_workers.emplace_back(new Worker());
    std::string why;
    for (unsigned i = 0; i < nworkers; ++i) {
        Worker *w = g_workers[i].get();
        if (!w->ensure_fibers(L->nthreads, why) || !w->ensure_arena(std::max<size_t>(L->shared_limit, 1), why)) {
            set_result(res, SG_INTERNAL_ERROR, "internal", why);
            return res->status;
        }
    }

    install_fault_handlers();
    std::vector<std::thread> threads;
    for (unsigned i = 1; i < nworkers; ++i) {
        try {
            Worker *w = g_workers[i].get();
            Launch *lp = L.get();
            threads.emplace_back([w, lp] { w->run(lp); });
        } catch (const std::exception &) {
            break;  // fewer OS threads: the others take the remaining blocks
        }
    }
    g_workers[0]->run(L.get());
    for (std::thread &t : threads) t.join();
    remove_fault_handlers();
    std::fflush(stdout);

    if (L->error.set) {
        ErrorRecord &e = L->error;
        std::string msg(e.message);
        if (e.has_ids)
            msg += format(" (block (%u, %u, %u), thread (%u, %u, %u))", e.block.x, e.block.y, e.block.z, e.thread.x,
                          e.thread.y, e.thread.z);
        set_result(res, SG_KERNEL_ERROR, e.kind, msg);
        if (e.has_ids) {
            res->has_ids = 1;
            res->block[0] = e.block.x, res->block[1] = e.block.y, res->block[2] = e.block.z;
            res->thread[0] = e.thread.x, res->thread[1] = e.thread.y, res->thread[2] = e.thread.z;
        }
        return res->status;
    }
    return SG_OK;
}
