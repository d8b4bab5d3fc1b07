// scangrade CPU emulator runtime: runs CUDA kernels on the CPU, CUDA threads as fibers.
//
// Compiled once per (sources, flags, compiler) into an object file and linked into every emulated
// module, with hidden visibility except the sg_* C ABI below (sg_host.h), which the executor calls
// (executor.cpp: the sandboxed process that loads the module for the grader).
//
// Execution model
//   * A launch spreads its blocks over `workers` OS threads (the caller is worker 0). Each worker
//     keeps up to kResident blocks resident at once, each in a slot with its own fibers (one per
//     CUDA thread) and its own shared-memory arena; slots persist across launches (sg_trim frees).
//   * A block runs in rounds: every runnable thread runs, in the schedule's order, until it blocks
//     (barrier, warp rendezvous), yields (atomic, volatile access, fence, __nanosleep) or returns; a
//     thread switches directly to the next one of the round, the last one back to the scheduler.
//     A barrier releases when every live thread waits at it; a warp rendezvous completes when every
//     lane of its mask arrived.
//   * After a round that ended at barriers only, the same block continues (the fast path). After a
//     round with a yield, the worker admits another block if it has a free slot and picks the next
//     block to run at random (seeded), so spin-waits on other blocks (decoupled look-back) progress
//     and see partial results.
//   * Progress: a yield whose (site, address, value) repeats one of the thread's recent yields is a
//     stale poll. When every resident block of every worker only polls stale and nothing is
//     written, the launch deadlocks (reported when deadlock detection is on; otherwise it waits
//     for the grader's timeout, as a GPU would hang).
//   * Memory hooks: modules are compiled with -fsanitize=thread, and this runtime defines the
//     __tsan_* entry points (no sanitizer runtime is linked). Volatile accesses are yield points;
//     with checks on, every access is checked (bounds, alignment, races, uninitialised shared).
//   * Errors end the block; the launch reports the failure of the lowest failing block.
//   * The runtime never times out on its own: the grader runs emulated code in a child process.

#include "sg_abi.h"

#include <dlfcn.h>
#include <link.h>
#include <signal.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#if !defined(__x86_64__) || defined(SG_USE_UCONTEXT)
#define SG_UCONTEXT 1
#include <ucontext.h>
#endif

#define SG_EXPORT extern "C" __attribute__((visibility("default")))
#define SG_HOOK extern "C" __attribute__((visibility("hidden")))

// The C ABI structures (sg_host.h, shared with the executor).
#include "sg_host.h"

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
// Schedules: the order in which the runnable threads of a block run in each round.
// ---------------------------------------------------------------------------------------------
enum Schedule : int { kAscending = 0, kDescending = 1, kRandom = 2, kScheduleCount };

inline uint64_t splitmix(uint64_t &s) {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

inline uint64_t mix(uint64_t a, uint64_t b) {
    uint64_t s = a * 0x9E3779B97F4A7C15ull ^ b;
    return splitmix(s);
}

// ---------------------------------------------------------------------------------------------
// Launch, block slots, workers, fibers.
// ---------------------------------------------------------------------------------------------
constexpr size_t kStack = __SG_STACK_SIZE;
constexpr size_t kHeader = __SG_HEADER_SIZE;
constexpr unsigned kMaxThreads = 1024;
constexpr unsigned char kPoison = 0xA5;
constexpr size_t kAltStack = 64 * 1024;
constexpr unsigned kResident = 4;  // blocks resident per worker
constexpr unsigned kSigs = 4;      // recent yield signatures per thread (stale-poll detection)
constexpr unsigned kMaxFindings = 256;
constexpr size_t kRedZone = 256;   // poisoned bytes before, between and after shared arrays (not counted)

enum FiberState : unsigned char { kRunnable, kYielded, kAtBarrier, kAtWarp, kDone };

struct Block;
struct Worker;
struct Launch;

struct Fiber {
    Context cx;
    __sg_ThreadCtx *hdr = nullptr;  // top of this fiber's stack region
    char *stack_lo = nullptr;       // lowest usable byte (just above the guard page)
    Block *blk = nullptr;
    unsigned linear = 0;
    FiberState state = kDone;
    // where it waits (barrier or warp intrinsic)
    const char *site_file = nullptr;
    int site_line = 0;
    int site_op = 0;
    // its last yield
    const char *poll_what = nullptr;
    const char *poll_file = nullptr;
    int poll_line = 0;
    uintptr_t poll_pc = 0;
    uint64_t sigs[kSigs];
    unsigned sig_pos = 0;
    // warp rendezvous
    uint64_t wval = 0, wres = 0;
    int warg = 0;
    uint16_t wserial = 0;  // serial of the last rendezvous of its warp it took part in
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

// One finding of the checks. Locations: "@<hex pc offset>" or "<file>:<line>" or "".
struct Finding {
    char kind[24];
    char loc[200];
    char other[200];
    uint3 block, thread, oblock, othread;
    int has_other;
    uint64_t block_linear;
    uint64_t seq;
    char msg[480];
};

// Shadow of one 4-byte granule: the last write and two readers (of distinct threads).
struct Acc {
    uint32_t inst;  // block instance (launch base + block index); 0: none
    uint32_t time;  // shared: barrier interval; global: launch clock
    uint32_t pc;    // pc offset in the module, or 0
    uint16_t tm;    // thread linear id (10 bits) | byte mask << 10 | volatile << 14
    uint16_t rv;    // warp rendezvous serial at the access
};
struct Cell {
    Acc w, r1, r2;
};

struct Alloc {
    uintptr_t base, size;
    Cell *shadow;
    size_t shadow_len;
    uint64_t lo, count;  // labelled buffer: elements [lo, lo + count) of `elem` bytes are inside it
    unsigned elem;       // 0: unlabelled (the whole allocation is inside)
    char name[32];
};

// One shared array of a block: the dynamic part (index 0) or a __shared__ variable.
struct ShArr {
    size_t off, bytes, elem;
    const char *name;
};

struct WarpGroup {
    bool used;
    unsigned mask, arrived;
    int op, width;
    const char *file;
    int line;
};
struct Warp {
    WarpGroup g[4];
    uint16_t serial;
};

struct SlotState {
    uint64_t gen = 0;
    void *ptr = nullptr;
};

struct Chunk {
    char *base;
    size_t len;
};

std::atomic<unsigned> g_next_slot_id{0};

size_t page_size() {
    static size_t p = size_t(sysconf(_SC_PAGESIZE));
    return p;
}

struct Launch {
    const Kernel *kernel = nullptr;
    void *const *args = nullptr;
    dim3 grid, block;
    uint64_t nblocks = 0;
    unsigned nthreads = 0;
    size_t dyn_shared = 0;
    size_t shared_limit = 0;
    int schedule = 0;
    uint64_t seed = 0;
    bool checks = false;
    bool detect_deadlock = false;
    uint32_t inst_base = 0;
    std::atomic<uint64_t> next_block{0};
    std::atomic<uint64_t> fail_block{UINT64_MAX};
    std::atomic<bool> abort{false};
    std::mutex mu;
    ErrorRecord error;
    Worker *workers[64];
    unsigned nworkers = 0;
    // checks
    std::vector<Alloc> allocs;  // sorted by base
    std::atomic<uint32_t> clock{1};
    std::atomic<uint32_t> *rel_ring = nullptr;  // 8 release times per block
    std::atomic<uint8_t> *rel_pos = nullptr;
    std::mutex fmu;
    std::vector<Finding> findings;
    uint64_t fseq = 0;
    uint64_t fdropped = 0;

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

// One resident block: fibers, shared-memory arena, round lists, warps, shadow (checks).
struct Block {
    Worker *w = nullptr;
    Fiber fibers[kMaxThreads];
    unsigned nfibers = 0;
    std::vector<Chunk> chunks;

    // shared memory arena: [red zone][dynamic part][red zone][array][red zone]..., guard page after
    // arena_cap; `arrays` is the table the memory hooks check shared addresses against.
    char *arena = nullptr;
    size_t arena_cap = 0, arena_map_len = 0, bump = 0, used = 0;
    std::vector<ShArr> arrays;
    uint64_t gen = 0;
    std::vector<SlotState> slots;

    // the block running in this slot
    bool busy = false;
    uint64_t linear = 0;
    uint32_t inst = 0;
    unsigned n = 0;
    std::vector<unsigned> order, next;
    unsigned cursor = 0;
    unsigned live = 0, at_barrier = 0;
    int acc_count = 0, acc_and = 1, acc_or = 0;
    int rel_count = 0, rel_and = 1, rel_or = 0;
    Warp warps[kMaxThreads / 32];
    bool progress = false, yielded = false, stale = false;
    uint64_t stale_at = 0;
    bool failed = false;
    ErrorRecord error;
    uint64_t rng = 0;
    // checks
    uint32_t bar_epoch = 0, last_bar_time = 0, last_acquire = 0;
    std::vector<Cell> sh;
    std::vector<uint32_t> init_inst;
    std::vector<uint8_t> init_mask;

    Block() {
        order.reserve(kMaxThreads);
        next.reserve(kMaxThreads);
    }
    ~Block() { trim(); }

    void trim() {
        for (Chunk &c : chunks) munmap(c.base, c.len);
        chunks.clear();
        nfibers = 0;
        if (arena) munmap(arena, arena_map_len);
        arena = nullptr;
        arena_cap = arena_map_len = 0;
    }

    // Make at least n fibers, each on its own kStack-aligned region with a guard page at the bottom.
    bool ensure_fibers(unsigned count, std::string &why) {
        if (count <= nfibers) return true;
        unsigned extra = count - nfibers;
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
            f.blk = this;
        }
        nfibers = count;
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

    bool owns_stack(uintptr_t addr) const {
        for (const Chunk &c : chunks) {
            uintptr_t base = reinterpret_cast<uintptr_t>(c.base);
            if (addr >= base && addr < base + c.len) return true;
        }
        return false;
    }
};

struct Worker {
    unsigned id = 0;
    std::unique_ptr<Block> slots[kResident];
    Context sched;
    Launch *launch = nullptr;
    Fiber *running = nullptr;  // the fiber executing now (null while the scheduler runs)
    char *altstack = nullptr;
    uint64_t rng = 0;
    alignas(64) std::atomic<uint64_t> progress{0};
    std::atomic<uint64_t> stuck{0};  // 1 + the total progress at which all its blocks were stale
    std::atomic<bool> idle{false};
    uint64_t dedup[4096];
    uint64_t dedup_block[4096];  // the lowest block that had it

    ~Worker() { trim(); }

    void trim() {
        for (auto &s : slots) s.reset();
        if (altstack) munmap(altstack, kAltStack);
        altstack = nullptr;
    }

    void run(Launch *L);
    bool start_block(Block *B, uint64_t b, std::string &why);
    void run_round(Block *B);
    void after_round(Block *B);
    void release_barrier(Block *B);
    void stuck_block(Block *B);
    bool deadlock_check(unsigned nres);
    void report_deadlock();
    [[noreturn]] void fail(Fiber *f, const char *kind, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
    void block_error(Block *B, Fiber *f, const char *kind, const std::string &msg);
    Fiber *fiber_owning(uintptr_t addr, bool *in_guard) const;
    void next_in_round(Fiber *from);
    void arrange(Block *B, std::vector<unsigned> &v);
};

uint64_t total_progress(Launch *L) {
    uint64_t t = 0;
    for (unsigned i = 0; i < L->nworkers; ++i) t += L->workers[i]->progress.load(std::memory_order_acquire);
    return t;
}

inline Fiber *current_fiber() { return static_cast<Fiber *>(__sg_self()->fiber); }

// Globals of this module's runtime: set around a launch.
std::atomic<int> g_active{0};
int g_checks = 0;
uintptr_t g_module_base = 0;
std::vector<std::pair<uintptr_t, uintptr_t>> g_segments;  // this module's loaded segments

#include "profile.inc"  // the memory-access profile (bank conflicts, sectors per request)

// ---------------------------------------------------------------------------------------------
// Findings (checks) and failures.
// ---------------------------------------------------------------------------------------------
void loc_pc(char *dst, size_t cap, uintptr_t pc) {
    if (pc && g_module_base && pc > g_module_base)
        std::snprintf(dst, cap, "@%lx", (unsigned long)(pc - g_module_base - 1));
    else
        dst[0] = '\0';
}

void loc_site(char *dst, size_t cap, const char *file, int line) {
    if (file)
        std::snprintf(dst, cap, "%s:%d", file, line);
    else
        dst[0] = '\0';
}

// Adds a finding unless an equal one (kind, both locations) was seen; an equal one of a lower block
// replaces it, so the finding kept does not depend on which worker ran which block first (the
// same message every run). Returns whether it is new.
bool add_finding(Worker *w, const Finding &fd) {
    Launch *L = w->launch;
    uint64_t h = 1469598103934665603ull;
    for (const char *s : {fd.kind, fd.loc, fd.other})
        for (; *s; ++s) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    h |= 1;
    size_t slot = h % 4096;
    for (size_t i = 0; i < 8; ++i) {
        uint64_t &e = w->dedup[(slot + i) % 4096], &eb = w->dedup_block[(slot + i) % 4096];
        if (e == h && eb <= fd.block_linear) return false;
        if (e == h || e == 0) {
            e = h, eb = fd.block_linear;
            break;
        }
    }
    std::lock_guard<std::mutex> lock(L->fmu);
    for (Finding &o : L->findings)
        if (!std::strcmp(o.kind, fd.kind) && !std::strcmp(o.loc, fd.loc) && !std::strcmp(o.other, fd.other)) {
            if (fd.block_linear < o.block_linear) o = fd, o.seq = L->fseq++;
            return false;
        }
    if (L->findings.size() >= kMaxFindings) {
        ++L->fdropped;
        return false;
    }
    L->findings.push_back(fd);
    L->findings.back().seq = L->fseq++;
    return true;
}

Finding make_finding(Fiber *f, const char *kind) {
    Finding fd;
    std::memset(&fd, 0, sizeof fd);
    std::snprintf(fd.kind, sizeof fd.kind, "%s", kind);
    if (f) {
        fd.block = f->hdr->blockIdx;
        fd.thread = f->hdr->threadIdx;
        fd.block_linear = f->blk->linear;
    }
    return fd;
}

uint3 thread_ids(const Launch *L, unsigned t) {
    const dim3 bd = L->block;
    return uint3{t % bd.x, (t / bd.x) % bd.y, t / (bd.x * bd.y)};
}

uint3 block_ids(const Launch *L, uint64_t b) {
    const dim3 g = L->grid;
    return uint3{unsigned(b % g.x), unsigned((b / g.x) % g.y), unsigned(b / (uint64_t(g.x) * g.y))};
}

// Switch from `from` to the next thread of this round, or back to the scheduler.
inline void Worker::next_in_round(Fiber *from) {
    Block *B = from->blk;
    unsigned c = ++B->cursor;
    Fiber *nx = c < B->order.size() ? &B->fibers[B->order[c]] : nullptr;
    running = nx;
    switch_to(&from->cx, nx ? &nx->cx : &sched);
}

void Worker::block_error(Block *B, Fiber *f, const char *kind, const std::string &msg) {
    if (B->failed) return;
    B->failed = true;
    ErrorRecord &e = B->error;
    e.set = true;
    e.block_linear = B->linear;
    e.has_ids = f != nullptr;
    e.block = block_ids(launch, B->linear);
    if (f) e.thread = f->hdr->threadIdx;
    std::snprintf(e.kind, sizeof e.kind, "%s", kind);
    std::snprintf(e.message, sizeof e.message, "%s", msg.c_str());
}

void Worker::fail(Fiber *f, const char *kind, const char *fmt, ...) {
    Block *B = f->blk;
    if (!B->failed) {
        B->failed = true;
        ErrorRecord &e = B->error;
        e.set = true;
        e.block_linear = B->linear;
        e.has_ids = true;
        e.block = f->hdr->blockIdx;
        e.thread = f->hdr->threadIdx;
        std::snprintf(e.kind, sizeof e.kind, "%s", kind);
        va_list ap;
        va_start(ap, fmt);
        std::vsnprintf(e.message, sizeof e.message, fmt, ap);
        va_end(ap);
    }
    running = nullptr;
    // Leave this thread for good; the scheduler sees `failed` and abandons the block.
    switch_to(&f->cx, &sched);
    __builtin_unreachable();
}

// A fatal finding: recorded, then the thread fails with the finding's message.
[[noreturn]] void fatal_finding(Fiber *f, Finding &fd) {
    Worker *w = f->blk->w;
    add_finding(w, fd);
    w->fail(f, fd.kind, "%s", fd.msg);
}

// Entry point of every emulated thread.
void fiber_main(void *arg) {
    Fiber *f = static_cast<Fiber *>(arg);
    Block *B = f->blk;
    const Kernel *k = B->w->launch->kernel;
    k->invoke(k->fn, B->w->launch->args);
    f->state = kDone;
    --B->live;
    B->progress = true;
    B->w->next_in_round(f);
    __builtin_unreachable();
}

void Worker::arrange(Block *B, std::vector<unsigned> &v) {
    switch (launch->schedule) {
        case kDescending:
            std::sort(v.begin(), v.end(), [](unsigned a, unsigned b) { return a > b; });
            break;
        case kRandom:
            for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[splitmix(B->rng) % i]);
            break;
        default:
            std::sort(v.begin(), v.end());
            break;
    }
}

bool Worker::start_block(Block *B, uint64_t b, std::string &why) {
    Launch *L = launch;
    const unsigned n = L->nthreads;
    // Arrays take at most shared_limit bytes; the red zones between them come on top.
    size_t cap = L->shared_limit + 128 * 1024;
    if (!B->ensure_fibers(n, why) || !B->ensure_arena(cap, why)) return false;
    B->w = this;
    B->busy = true;
    B->linear = b;
    B->inst = L->inst_base + uint32_t(b);
    B->n = n;
    const dim3 g = L->grid, bd = L->block;
    uint3 bid = block_ids(L, b);
    ++B->gen;
    std::memset(B->arena, kPoison, kRedZone + L->dyn_shared);  // reads of unwritten shared memory: poison
    B->arrays.assign(1, ShArr{kRedZone, L->dyn_shared, 1, nullptr});
    B->bump = (kRedZone + L->dyn_shared + kRedZone + 15) & ~size_t(15);
    B->used = L->dyn_shared;
    B->acc_count = 0, B->acc_and = 1, B->acc_or = 0;
    B->rel_count = 0, B->rel_and = 1, B->rel_or = 0;
    B->live = n;
    B->at_barrier = 0;
    B->progress = B->yielded = B->stale = B->failed = false;
    B->error.set = false;
    B->rng = mix(L->seed, b + 1);
    B->bar_epoch = 1;
    B->last_bar_time = B->last_acquire = 0;
    std::memset(B->warps, 0, sizeof(Warp) * ((n + 31) / 32));
    for (unsigned t = 0; t < n; ++t) {
        Fiber &f = B->fibers[t];
        f.linear = t;
        f.state = kRunnable;
        f.sig_pos = 0;
        std::memset(f.sigs, 0, sizeof f.sigs);
        f.wserial = 0;
        __sg_ThreadCtx *h = f.hdr;
        h->threadIdx = thread_ids(L, t);
        h->blockIdx = bid;
        h->blockDim = bd;
        h->gridDim = g;
        prepare(&f.cx, f.stack_lo, reinterpret_cast<char *>(h), &fiber_main, &f);
    }
    B->order.clear();
    B->next.clear();
    for (unsigned t = 0; t < n; ++t) B->order.push_back(t);
    if (L->schedule != kAscending) arrange(B, B->order);
    if (L->checks) {
        size_t granules = (B->arena_cap + 3) / 4;
        if (B->sh.size() < granules) {
            B->sh.assign(granules, Cell{});
            B->init_inst.assign(granules, 0);
            B->init_mask.assign(granules, 0);
        }
    }
    return true;
}

void Worker::run_round(Block *B) {
    B->cursor = 0;
    B->progress = false;
    B->yielded = false;
    running = &B->fibers[B->order[0]];
    switch_to(&sched, &running->cx);
    running = nullptr;
}

const char *warp_op_name(int op) {
    static const char *names[] = {"__syncwarp", "__shfl_sync", "__shfl_up_sync", "__shfl_down_sync",
                                  "__shfl_xor_sync", "__ballot_sync", "__any_sync", "__all_sync",
                                  "__reduce_add_sync", "__reduce_min_sync", "__reduce_max_sync",
                                  "__match_any_sync"};
    return op >= 0 && op < __SG_W_COUNT ? names[op] : "a warp intrinsic";
}

std::string ids_text(uint3 t) { return format("(%u, %u, %u)", t.x, t.y, t.z); }

void Worker::release_barrier(Block *B) {
    Launch *L = launch;
    if (g_profile) profile_barrier(B);
    Fiber *first = nullptr;
    for (unsigned t = 0; t < B->n; ++t) {  // plain mode too: a GPU does not run this as written
        Fiber &f = B->fibers[t];
        if (f.state != kAtBarrier) continue;
        if (!first) {
            first = &f;
            continue;
        }
        if (f.site_line != first->site_line ||
            (f.site_file != first->site_file && std::strcmp(f.site_file, first->site_file) != 0)) {
            Finding fd = make_finding(&f, "barrier-divergence");
            loc_site(fd.loc, sizeof fd.loc, f.site_file, f.site_line);
            loc_site(fd.other, sizeof fd.other, first->site_file, first->site_line);
            fd.has_other = 1;
            fd.oblock = fd.block;
            fd.othread = first->hdr->threadIdx;
            std::snprintf(fd.msg, sizeof fd.msg,
                          "threads of a block wait at different __syncthreads(): thread %s at {L}, thread %s "
                          "at {O}",
                          ids_text(f.hdr->threadIdx).c_str(), ids_text(first->hdr->threadIdx).c_str());
            add_finding(this, fd);
            block_error(B, &f, fd.kind, fd.msg);
            return;
        }
    }
    if (L->checks) {
        if (B->live < B->n && first) {
            Fiber *gone = nullptr;
            for (unsigned t = 0; t < B->n && !gone; ++t)
                if (B->fibers[t].state == kDone) gone = &B->fibers[t];
            Finding fd = make_finding(first, "barrier-divergence");
            loc_site(fd.loc, sizeof fd.loc, first->site_file, first->site_line);
            std::snprintf(fd.msg, sizeof fd.msg,
                          "%u threads wait at __syncthreads() at {L} while %u threads of the block (thread %s "
                          "first) have exited: every thread of the block must reach the same __syncthreads()",
                          B->at_barrier, B->n - B->live, ids_text(gone->hdr->threadIdx).c_str());
            add_finding(this, fd);
            block_error(B, first, fd.kind, fd.msg);
            return;
        }
        B->last_bar_time = L->clock.fetch_add(1) + 1;
    }
    B->rel_count = B->acc_count, B->rel_and = B->acc_and, B->rel_or = B->acc_or;
    B->acc_count = 0, B->acc_and = 1, B->acc_or = 0;
    B->order.clear();
    const unsigned n = B->n;
    if (L->schedule == kDescending) {
        for (unsigned t = n; t-- > 0;)
            if (B->fibers[t].state == kAtBarrier) B->fibers[t].state = kRunnable, B->order.push_back(t);
    } else {
        for (unsigned t = 0; t < n; ++t)
            if (B->fibers[t].state == kAtBarrier) B->fibers[t].state = kRunnable, B->order.push_back(t);
        if (L->schedule == kRandom) arrange(B, B->order);
    }
    B->at_barrier = 0;
    ++B->bar_epoch;
    B->progress = true;
}

// Lane mask of the lanes of warp wi that exist in the block.
inline unsigned existing_lanes(const Block *B, unsigned wi) {
    unsigned have = B->n - wi * 32;
    return have >= 32 ? 0xffffffffu : ((1u << have) - 1);
}

// Completes a rendezvous: results for every arrived lane; the others become runnable (next round).
// Returns an error message (empty when fine). `self` (the last lane to arrive, or null) continues.
std::string complete_warp(Block *B, unsigned wi, WarpGroup &g, Fiber *self) {
    Fiber *lanes = &B->fibers[wi * 32];
    unsigned arrived = g.arrived;
    uint64_t res[32];
    for (unsigned l = 0; l < 32; ++l) {
        if (!(arrived >> l & 1)) continue;
        Fiber &f = lanes[l];
        uint64_t r = 0;
        int src = -1;
        unsigned width = unsigned(g.width), base = l & ~(width - 1);
        switch (g.op) {
            case __SG_W_IDX: src = int(base + (unsigned(f.warg) & (width - 1))); break;
            case __SG_W_UP: src = int(l) - f.warg < int(base) ? int(l) : int(l) - f.warg; break;
            case __SG_W_DOWN: src = l + unsigned(f.warg) >= base + width ? int(l) : int(l + unsigned(f.warg)); break;
            case __SG_W_XOR: src = int(l ^ unsigned(f.warg)); if (unsigned(src) >= base + width || unsigned(src) < base) src = int(l); break;
            case __SG_W_BALLOT:
            case __SG_W_ANY:
            case __SG_W_ALL: {
                unsigned bits = 0;
                for (unsigned k = 0; k < 32; ++k)
                    if ((arrived >> k & 1) && lanes[k].wval) bits |= 1u << k;
                r = g.op == __SG_W_BALLOT ? bits : g.op == __SG_W_ANY ? bits != 0 : bits == arrived;
                break;
            }
            case __SG_W_RADD:
            case __SG_W_RMIN:
            case __SG_W_RMAX: {
                bool sgn = f.warg == 1, first = true;
                uint32_t acc = 0;
                for (unsigned k = 0; k < 32; ++k) {
                    if (!(arrived >> k & 1)) continue;
                    uint32_t v = uint32_t(lanes[k].wval);
                    if (first) acc = v, first = false;
                    else if (g.op == __SG_W_RADD) acc += v;
                    else if (g.op == __SG_W_RMIN) acc = sgn ? (int32_t(v) < int32_t(acc) ? v : acc) : std::min(v, acc);
                    else acc = sgn ? (int32_t(v) > int32_t(acc) ? v : acc) : std::max(v, acc);
                }
                r = acc;
                break;
            }
            case __SG_W_MATCH_ANY: {
                unsigned bits = 0;
                for (unsigned k = 0; k < 32; ++k)
                    if ((arrived >> k & 1) && lanes[k].wval == f.wval) bits |= 1u << k;
                r = bits;
                break;
            }
            default: break;
        }
        if (src >= 0) {
            if (!(arrived >> src & 1))
                return format("%s at %s:%d: lane %u reads lane %d, which is not in the mask 0x%08x (or has exited)",
                              warp_op_name(g.op), g.file, g.line, l, src, g.mask);
            r = lanes[src].wval;
        }
        res[l] = r;
    }
    Warp &W = B->warps[wi];
    ++W.serial;
    for (unsigned l = 0; l < 32; ++l) {
        if (!(arrived >> l & 1)) continue;
        Fiber &f = lanes[l];
        f.wres = res[l];
        f.wserial = W.serial;
        if (&f != self) {
            f.state = kRunnable;
            B->next.push_back(f.linear);
        }
    }
    g.used = false;
    B->progress = true;
    return std::string();
}

// No thread of the block can run and not all wait at one barrier: report what waits where.
void Worker::stuck_block(Block *B) {
    Launch *L = launch;
    if (!L->checks) {
        // Lenient: a rendezvous whose missing lanes have all exited completes without them.
        for (unsigned wi = 0; wi * 32 < B->n; ++wi) {
            for (WarpGroup &g : B->warps[wi].g) {
                if (!g.used) continue;
                unsigned need = g.mask & existing_lanes(B, wi);
                for (unsigned l = 0; l < 32; ++l)
                    if ((need >> l & 1) && B->fibers[wi * 32 + l].state == kDone) need &= ~(1u << l);
                if ((g.arrived & need) == need) {
                    std::string err = complete_warp(B, wi, g, nullptr);
                    if (!err.empty()) {
                        block_error(B, nullptr, "barrier-divergence", err);
                        return;
                    }
                }
            }
        }
        if (!B->next.empty()) {
            B->order.swap(B->next);
            B->next.clear();
            arrange(B, B->order);
            return;
        }
    }
    Fiber *at_bar = nullptr, *at_warp = nullptr, *gone = nullptr;
    for (unsigned t = 0; t < B->n; ++t) {
        Fiber &f = B->fibers[t];
        if (f.state == kAtBarrier && !at_bar) at_bar = &f;
        if (f.state == kAtWarp && !at_warp) at_warp = &f;
        if (f.state == kDone && !gone) gone = &f;
    }
    Fiber *who = at_warp ? at_warp : at_bar;
    Finding fd = make_finding(who, "barrier-divergence");
    loc_site(fd.loc, sizeof fd.loc, who->site_file, who->site_line);
    std::string msg;
    if (at_warp && at_bar) {
        loc_site(fd.other, sizeof fd.other, at_bar->site_file, at_bar->site_line);
        fd.has_other = 1;
        fd.oblock = fd.block;
        fd.othread = at_bar->hdr->threadIdx;
        msg = format("thread %s waits at %s at {L} for lanes of its warp, while thread %s waits at __syncthreads() "
                     "at {O}: the threads of a block wait at different barriers",
                     ids_text(at_warp->hdr->threadIdx).c_str(), warp_op_name(at_warp->site_op),
                     ids_text(at_bar->hdr->threadIdx).c_str());
    } else {
        unsigned wi = at_warp->linear / 32;
        unsigned missing = 0;
        for (WarpGroup &g : B->warps[wi].g)
            if (g.used && (g.arrived >> (at_warp->linear % 32) & 1)) missing = (g.mask & existing_lanes(B, wi)) & ~g.arrived;
        msg = format("thread %s waits at %s at {L} for lanes 0x%08x of its warp, which %s", 
                     ids_text(at_warp->hdr->threadIdx).c_str(), warp_op_name(at_warp->site_op), missing,
                     gone ? "have exited or never call it" : "never call it");
    }
    std::snprintf(fd.msg, sizeof fd.msg, "%s", msg.c_str());
    add_finding(this, fd);
    block_error(B, who, fd.kind, fd.msg);
}

void Worker::after_round(Block *B) {
    if (B->failed || B->live == 0) return;
    if (!B->next.empty()) {
        B->order.swap(B->next);
        B->next.clear();
        arrange(B, B->order);
        return;
    }
    if (B->at_barrier == B->live) {
        release_barrier(B);
        return;
    }
    stuck_block(B);
}

// Whether every worker is stuck at the same total progress (or idle): a deadlock.
bool Worker::deadlock_check(unsigned nres) {
    Launch *L = launch;
    uint64_t T = total_progress(L);
    for (auto &s : slots) {
        Block *B = s.get();
        if (B && B->busy && (!B->stale || B->stale_at != T)) {
            stuck.store(0);
            return false;
        }
    }
    (void)nres;
    stuck.store(T + 1);
    for (unsigned i = 0; i < L->nworkers; ++i) {
        Worker *o = L->workers[i];
        if (o == this || o->idle.load()) continue;
        if (o->stuck.load() != T + 1) return false;
    }
    return total_progress(L) == T;
}

void Worker::report_deadlock() {
    Launch *L = launch;
    Block *low = nullptr;
    for (auto &s : slots)
        if (s && s->busy && (!low || s->linear < low->linear)) low = s.get();
    if (!low) return;
    Fiber *poller = nullptr;
    unsigned pollers = 0, waiting = 0;
    const char *bar_file = nullptr;
    int bar_line = 0;
    for (unsigned t = 0; t < low->n; ++t) {
        Fiber &f = low->fibers[t];
        if (f.state == kYielded || f.state == kRunnable) {
            ++pollers;
            if (!poller) poller = &f;
        } else if (f.state == kAtBarrier || f.state == kAtWarp) {
            ++waiting;
            if (!bar_file) bar_file = f.site_file, bar_line = f.site_line;
        }
    }
    if (!poller) poller = &low->fibers[0];
    Finding fd = make_finding(poller, "deadlock");
    if (poller->poll_file)
        loc_site(fd.loc, sizeof fd.loc, poller->poll_file, poller->poll_line);
    else
        loc_pc(fd.loc, sizeof fd.loc, poller->poll_pc);
    std::string msg = format("deadlock: no thread can make progress; thread %s of block %s keeps polling (%s) at {L} "
                             "and nothing it reads changes",
                             ids_text(poller->hdr->threadIdx).c_str(), ids_text(poller->hdr->blockIdx).c_str(),
                             poller->poll_what ? poller->poll_what : "a spin-wait");
    if (pollers > 1) msg += format("; %u threads of the block poll", pollers);
    if (waiting) {
        loc_site(fd.other, sizeof fd.other, bar_file, bar_line);
        msg += format(", %u wait at {O}", waiting);
    }
    unsigned blocks = 0;
    for (unsigned i = 0; i < L->nworkers; ++i)
        for (auto &s : L->workers[i]->slots)
            if (s && s->busy) ++blocks;
    msg += format(" (%u blocks resident, none can continue)", blocks);
    std::snprintf(fd.msg, sizeof fd.msg, "%s", msg.c_str());
    add_finding(this, fd);
    ErrorRecord rec;
    rec.set = true;
    rec.block_linear = low->linear;
    rec.has_ids = true;
    rec.block = poller->hdr->blockIdx;
    rec.thread = poller->hdr->threadIdx;
    std::snprintf(rec.kind, sizeof rec.kind, "deadlock");
    std::snprintf(rec.message, sizeof rec.message, "%s", fd.msg);
    L->report(rec);
    L->abort.store(true);
}

Fiber *Worker::fiber_owning(uintptr_t addr, bool *in_guard) const {
    for (const auto &s : slots) {
        if (!s) continue;
        for (const Chunk &c : s->chunks) {
            uintptr_t base = reinterpret_cast<uintptr_t>(c.base);
            if (addr >= base && addr < base + c.len) {
                uintptr_t region = addr & ~(kStack - 1);
                *in_guard = addr - region < page_size();
                return static_cast<Fiber *>(reinterpret_cast<__sg_ThreadCtx *>(region + kStack - kHeader)->fiber);
            }
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
        Block *B = f->blk;
        uintptr_t arena = reinterpret_cast<uintptr_t>(B->arena);
        if (B->arena && addr >= arena + B->arena_cap && addr < arena + B->arena_map_len)
            w->fail(f, "illegal-address",
                    "access %zu bytes past the end of the block's shared-memory arena (its shared arrays, %zu "
                    "bytes, and the red zones around them)",
                    size_t(addr - arena - B->arena_cap), B->used);
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
    rng = mix(L->seed ^ 0x5bd1e995ull, id + 1);
    std::memset(dedup, 0, sizeof dedup);
    unsigned nres = 0;
    bool no_more = false, want_more = false;
    Block *last = nullptr;
    unsigned stuck_passes = 0;
    for (;;) {
        uint64_t fb = L->fail_block.load(std::memory_order_relaxed);
        bool aborting = L->abort.load(std::memory_order_relaxed);
        if (fb != UINT64_MAX || aborting) {
            for (auto &s : slots)
                if (s && s->busy && (aborting || s->linear > fb)) s->busy = false, --nres, last = nullptr;
        }
        if (!no_more && nres < kResident && (nres == 0 || want_more)) {
            uint64_t b = L->next_block.fetch_add(1);
            if (b >= L->nblocks || b > L->fail_block.load() || aborting) {
                no_more = true;
            } else {
                Block *B = nullptr;
                for (auto &s : slots) {
                    if (!s) s.reset(new (std::nothrow) Block());
                    if (s && !s->busy) {
                        B = s.get();
                        break;
                    }
                }
                std::string why;
                if (!B || !start_block(B, b, why)) {
                    ErrorRecord rec;
                    rec.set = true;
                    rec.block_linear = b;
                    std::snprintf(rec.kind, sizeof rec.kind, "internal");
                    std::snprintf(rec.message, sizeof rec.message, "%s", B ? why.c_str() : "out of memory");
                    L->report(rec);
                    no_more = true;
                } else {
                    ++nres;
                    last = B;
                }
            }
            want_more = false;
        }
        if (nres == 0) break;
        Block *B = last;
        if (!B || !B->busy || B->yielded) {
            unsigned pick = unsigned(splitmix(rng) % nres);
            for (auto &s : slots)
                if (s && s->busy && pick-- == 0) {
                    B = s.get();
                    break;
                }
        }
        run_round(B);
        if (!B->failed) after_round(B);
        if (B->failed) {
            L->report(B->error);
            B->busy = false, --nres, last = nullptr;
            continue;
        }
        if (B->live == 0) {
            if (g_profile) profile_block_end(B);
            B->busy = false, --nres, last = nullptr;
            progress.fetch_add(1, std::memory_order_release);
            stuck.store(0);
            stuck_passes = 0;
            continue;
        }
        last = B;
        want_more = B->yielded;
        if (B->progress) {
            B->stale = false;
            progress.fetch_add(1, std::memory_order_release);
            stuck.store(0);
            stuck_passes = 0;
            continue;
        }
        B->stale = true;
        B->stale_at = total_progress(L);
        if (!no_more && nres < kResident) continue;  // admit another block first
        if (deadlock_check(nres)) {
            if (L->fail_block.load() != UINT64_MAX) {
                L->abort.store(true);  // a failed block is what the others wait for
            } else if (L->detect_deadlock && ++stuck_passes >= 3) {
                report_deadlock();
            } else if (!L->detect_deadlock) {
                struct timespec ts = {0, 1000000};  // wait, like a GPU would hang, without burning a core
                nanosleep(&ts, nullptr);
            }
        } else if (stuck.load()) {
            std::this_thread::yield();
        }
    }
    idle.store(true);
    tl_worker = nullptr;
    if (alt) sigaltstack(&previous, nullptr);
    launch = nullptr;
}

std::mutex g_launch_mu;  // one launch at a time per module
std::vector<std::unique_ptr<Worker>> g_workers;

// Device printf output, kept until Python takes it.
constexpr size_t kOutputCap = 64 * 1024;
std::mutex g_out_mu;
std::string g_out;
bool g_out_cut = false;

void append_output(const char *s, size_t n) {
    std::lock_guard<std::mutex> lock(g_out_mu);
    if (g_out.size() + n > kOutputCap) {
        n = g_out.size() < kOutputCap ? kOutputCap - g_out.size() : 0;
        g_out_cut = true;
    }
    g_out.append(s, n);
}

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

// ---------------------------------------------------------------------------------------------
// Yield points and the checks of every memory access.
// ---------------------------------------------------------------------------------------------
inline bool on_fiber() { return g_active.load(std::memory_order_relaxed) != 0; }

void yield_here(Fiber *f, const char *what, const char *file, int line, uintptr_t pc, const void *addr,
                unsigned size) {
    Block *B = f->blk;
    uint64_t value = 0;
    if (addr) std::memcpy(&value, addr, size < 8 ? size : 8);
    uint64_t sig = mix(mix(file ? uintptr_t(file) : pc, uint64_t(line)), mix(uintptr_t(addr), value)) | 1;
    bool fresh = true;
    for (unsigned i = 0; i < kSigs; ++i)
        if (f->sigs[i] == sig) fresh = false;
    if (fresh) {
        f->sigs[f->sig_pos++ % kSigs] = sig;
        B->progress = true;
    }
    f->poll_what = what;
    f->poll_file = file;
    f->poll_line = line;
    f->poll_pc = pc;
    f->state = kYielded;
    B->next.push_back(f->linear);
    B->yielded = true;
    B->w->next_in_round(f);
    f->state = kRunnable;
}

inline uint32_t thr_of(const Acc &a) { return a.tm & 0x3ff; }
inline uint32_t mask_of(const Acc &a) { return (a.tm >> 10) & 0xf; }

void release(Launch *L, Block *B) {
    if (!L->rel_ring) return;
    uint32_t t = L->clock.fetch_add(1) + 1;
    uint8_t p = L->rel_pos[B->linear].fetch_add(1);
    L->rel_ring[B->linear * 8 + (p & 7)].store(t, std::memory_order_relaxed);
}

void acquire(Launch *L, Block *B) { B->last_acquire = L->clock.fetch_add(1) + 1; }

// Whether `a` (another thread's access) happens before the current access of f.
bool ordered(Launch *L, Block *B, Fiber *f, const Acc &a, bool global) {
    if (a.inst == B->inst) {
        if (thr_of(a) == f->linear) return true;
        if (global ? B->last_bar_time > a.time : B->bar_epoch != a.time) return true;
        if (thr_of(a) / 32 == f->linear / 32 && int16_t(uint16_t(f->wserial - a.rv)) > 0) return true;
        return false;
    }
    if (!global || !L->rel_ring) return true;
    uint64_t ob = uint64_t(a.inst - L->inst_base);
    if (ob >= L->nblocks) return true;
    for (unsigned i = 0; i < 8; ++i) {
        uint32_t r = L->rel_ring[ob * 8 + i].load(std::memory_order_relaxed);
        if (r > a.time && r < B->last_acquire) return true;
    }
    return false;
}

const char *race_names[] = {"read-after-write", "write-after-read", "write-after-write"};

void report_race(Launch *L, Fiber *f, const Acc &a, int which, uintptr_t pc, bool global, bool vol) {
    Finding fd = make_finding(f, "race");
    loc_pc(fd.loc, sizeof fd.loc, pc);
    if (a.pc) std::snprintf(fd.other, sizeof fd.other, "@%x", a.pc);
    fd.has_other = 1;
    uint64_t ob = uint64_t(a.inst - L->inst_base);
    fd.oblock = block_ids(L, ob);
    fd.othread = thread_ids(L, thr_of(a));
    bool same_block = a.inst == f->blk->inst;
    const char *verb = which == 0 ? "reads" : "writes";
    const char *overb = which == 1 ? "read" : "wrote";
    std::snprintf(fd.msg, sizeof fd.msg,
                  "race (%s) on %s memory: thread %s of block %s %s at {L} what thread %s of block %s %s at {O}, "
                  "with no %s between them%s",
                  race_names[which], global ? "global" : "shared", ids_text(f->hdr->threadIdx).c_str(),
                  ids_text(f->hdr->blockIdx).c_str(), verb, ids_text(fd.othread).c_str(), ids_text(fd.oblock).c_str(),
                  overb,
                  same_block ? "__syncthreads() (or __syncwarp() within a warp)"
                             : "synchronisation between the blocks (a __threadfence() and a flag, or separate kernels)",
                  vol && !global ? " (volatile does not order threads: since Volta, warp-synchronous code needs "
                                   "__syncwarp())"
                                 : "");
    add_finding(f->blk->w, fd);
}

void uninit_read(Fiber *f, uintptr_t pc, size_t off) {
    Finding fd = make_finding(f, "uninitialized-read");
    loc_pc(fd.loc, sizeof fd.loc, pc);
    std::snprintf(fd.msg, sizeof fd.msg,
                  "thread %s of block %s reads shared memory at {L} (byte %zu of the block's shared memory) that "
                  "no thread of the block has written",
                  ids_text(f->hdr->threadIdx).c_str(), ids_text(f->hdr->blockIdx).c_str(), off);
    add_finding(f->blk->w, fd);
}

// Race bookkeeping on the cells of one access. kind: 0 read, 1 write, 2 atomic (bounds/init only).
void track(Launch *L, Fiber *f, Cell *cells, size_t off, unsigned size, int kind, bool vol, uintptr_t pc,
           bool global) {
    Block *B = f->blk;
    uint32_t now = global ? L->clock.load(std::memory_order_relaxed) : B->bar_epoch;
    uint32_t pcoff = pc && g_module_base ? uint32_t(pc - g_module_base - 1) : 0;
    size_t g0 = off >> 2, g1 = (off + size - 1) >> 2;
    uint16_t rv = B->warps[f->linear / 32].serial;
    for (size_t gi = g0; gi <= g1; ++gi) {
        unsigned lo = gi == g0 ? unsigned(off & 3) : 0, hi = gi == g1 ? unsigned((off + size - 1) & 3) : 3;
        uint32_t mask = ((1u << (hi + 1)) - 1) & ~((1u << lo) - 1);
        Cell &c = cells[gi];
        if (!global) {
            if (kind != 1 && (B->init_inst[gi] != B->inst || (B->init_mask[gi] & mask) != mask))
                uninit_read(f, pc, gi * 4 + lo);
            if (kind != 0) {
                if (B->init_inst[gi] != B->inst) B->init_inst[gi] = B->inst, B->init_mask[gi] = 0;
                B->init_mask[gi] |= uint8_t(mask);
            }
        }
        if (kind == 2) continue;
        bool live_w = c.w.inst >= L->inst_base && c.w.inst;
        Acc me{B->inst, now, pcoff, uint16_t(f->linear | mask << 10 | (vol ? 1u << 14 : 0)), rv};
        if (kind == 0) {
            if (live_w && (mask_of(c.w) & mask) && !ordered(L, B, f, c.w, global))
                report_race(L, f, c.w, 0, pc, global, vol);
            Acc *slot = nullptr;
            for (Acc *r : {&c.r1, &c.r2}) {
                bool live = r->inst >= L->inst_base && r->inst && (r->inst != B->inst || !ordered(L, B, f, *r, global));
                if (!live || (r->inst == B->inst && thr_of(*r) == f->linear)) {
                    slot = r;
                    break;
                }
            }
            if (slot) *slot = me;
        } else {
            if (live_w && (mask_of(c.w) & mask) && !ordered(L, B, f, c.w, global))
                report_race(L, f, c.w, 2, pc, global, vol);
            for (Acc *r : {&c.r1, &c.r2}) {
                bool live = r->inst >= L->inst_base && r->inst;
                if (live && (mask_of(*r) & mask) && !ordered(L, B, f, *r, global)) {
                    report_race(L, f, *r, 1, pc, global, vol);
                    break;
                }
            }
            c.w = me;
        }
    }
}

Alloc *find_alloc(Launch *L, uintptr_t addr) {
    auto &v = L->allocs;
    size_t lo = 0, hi = v.size();
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (v[mid].base <= addr) lo = mid + 1;
        else hi = mid;
    }
    if (lo == 0) return nullptr;
    Alloc *a = &v[lo - 1];
    return addr < a->base + a->size + 4096 ? a : nullptr;  // a little past the end: an overrun of it
}

bool in_module(uintptr_t addr) {
    for (auto &s : g_segments)
        if (addr >= s.first && addr < s.second) return true;
    return false;
}

[[noreturn]] void bad_access(Fiber *f, const char *kind, uintptr_t pc, const std::string &msg) {
    Finding fd = make_finding(f, kind);
    loc_pc(fd.loc, sizeof fd.loc, pc);
    std::snprintf(fd.msg, sizeof fd.msg, "%s", msg.c_str());
    fatal_finding(f, fd);
}

const char *access_noun(int kind) { return kind == 0 ? "read" : kind == 1 ? "write" : "atomic update"; }

// "name[i] (...)": element i of an array of `count` elements of `elem` bytes starting at `base`.
std::string element_text(const char *name, const char *what, uintptr_t base, uint64_t count, size_t elem,
                         uintptr_t addr) {
    long long d = (long long)(addr - base), i = d >= 0 ? d / (long long)elem : -((-d + (long long)elem - 1) / (long long)elem);
    std::string where = i < 0 ? format("%lld before the start of ", -i)
                        : uint64_t(i) >= count ? format("%llu past the end of ", (unsigned long long)(i - count + 1))
                                               : std::string("inside ");
    return format("%s[%lld] (%s%s%s, %llu element%s)", name, i, where.c_str(), what, name, (unsigned long long)count,
                  count == 1 ? "" : "s");
}

// Shared accesses (plain mode too): inside one of the block's arrays, or out of bounds naming the
// nearest array (red zones keep the arrays apart, so an overrun of one does not land in the next).
void shared_bounds(Fiber *f, Block *B, uintptr_t addr, unsigned size, int kind, uintptr_t pc) {
    size_t off = addr - reinterpret_cast<uintptr_t>(B->arena), best = SIZE_MAX;
    const ShArr *near = nullptr;
    for (const ShArr &a : B->arrays) {
        if (off >= a.off && off + size <= a.off + a.bytes) return;
        size_t d = off < a.off ? a.off - off : off >= a.off + a.bytes ? off - (a.off + a.bytes) : 0;
        if (d < best) best = d, near = &a;
    }
    const char *name = near->name ? near->name : "extern __shared__";
    std::string what = element_text(name, "shared array ", reinterpret_cast<uintptr_t>(B->arena) + near->off,
                                    near->bytes / near->elem, near->elem, addr);
    bad_access(f, "out-of-bounds", pc,
               format("out-of-bounds shared memory %s of %s at {L}%s", access_noun(kind), what.c_str(),
                      near == &B->arrays[0] && near->bytes == 0 ? " (the launch gives no dynamic shared memory)" : ""));
}

// Plain mode: the cheap range test of every load and store (only shared memory is checked).
inline void plain_access(uintptr_t addr, unsigned size, int kind, uintptr_t pc) {
    if (!on_fiber()) return;
    Fiber *f = current_fiber();
    Block *B = f->blk;
    if (addr - reinterpret_cast<uintptr_t>(B->arena) < B->arena_map_len) shared_bounds(f, B, addr, size, kind, pc);
}

// kind: 0 read, 1 write, 2 atomic
void check_access(uintptr_t addr, unsigned size, int kind, bool vol, uintptr_t pc) {
    Fiber *f = current_fiber();
    if (((addr ^ reinterpret_cast<uintptr_t>(f->hdr)) & ~(kStack - 1)) == 0) return;  // its own stack
    Block *B = f->blk;
    Launch *L = B->w->launch;
    const char *verb = kind == 0 ? "reads" : kind == 1 ? "writes" : "atomically updates";
    if (size > 1 && (addr & (size - 1)) != 0)
        bad_access(f, "misaligned",pc, format("misaligned access: thread %s of block %s %s %u bytes at address 0x%lx at {L}, "
                                     "which is not a multiple of %u",
                                     ids_text(f->hdr->threadIdx).c_str(), ids_text(f->hdr->blockIdx).c_str(), verb,
                                     size, (unsigned long)addr, size));
    uintptr_t a0 = reinterpret_cast<uintptr_t>(B->arena);
    if (addr - a0 < B->arena_map_len) {
        shared_bounds(f, B, addr, size, kind, pc);
        track(L, f, B->sh.data(), addr - a0, size, kind, vol, pc, false);
        return;
    }
    if (Alloc *al = find_alloc(L, addr)) {
        if (addr + size > al->base + al->size)
            bad_access(f, "out-of-bounds", pc,
                       format("out-of-bounds global memory access: thread %s of block %s %s %u bytes at {L}, %zu "
                              "bytes past the end of a %zu-byte device allocation",
                              ids_text(f->hdr->threadIdx).c_str(), ids_text(f->hdr->blockIdx).c_str(), verb, size,
                              size_t(addr + size - al->base - al->size), size_t(al->size)));
        uintptr_t ilo = al->base + al->lo * al->elem;
        if (al->elem && (addr < ilo || addr + size > ilo + al->count * al->elem))
            bad_access(f, "out-of-bounds", pc,
                       format("out-of-bounds global memory %s of %s at {L}", access_noun(kind),
                              element_text(al->name, "", ilo, al->count, al->elem, addr).c_str()));
        if (vol || kind == 2) {
            if (kind != 0) release(L, B);
            if (kind != 1) acquire(L, B);
            return;
        }
        if (al->shadow) track(L, f, al->shadow, addr - al->base, size, kind, vol, pc, true);
        return;
    }
    if (in_module(addr)) return;  // __device__ and __constant__ variables
    for (auto &s : B->w->slots)
        if (s && s->owns_stack(addr)) return;  // another thread's local variable
    bad_access(f, "out-of-bounds", pc,
               format("out-of-bounds access: thread %s of block %s %s %u bytes at address 0x%lx at {L}, which is in "
                      "no device allocation, not in the block's shared memory and not a local variable%s",
                      ids_text(f->hdr->threadIdx).c_str(), ids_text(f->hdr->blockIdx).c_str(), verb, size,
                      (unsigned long)addr, addr < 65536 ? " (a null or small pointer)" : ""));
}

Worker *current_worker() { return current_fiber()->blk->w; }

uint64_t do_atomic(int opf, void *addr, int size, uint64_t a, uint64_t b, bool *changed) {
    int op = opf & 0xff;
    bool sgn = opf & __SG_A_SIGNED, flt = opf & __SG_A_FLOAT;
    auto apply = [&](uint64_t cur) -> uint64_t {
        uint64_t m = size == 8 ? ~0ull : size == 4 ? 0xffffffffull : 0xffffull;
        if (flt) {
            if (size == 4) {
                float x, y;
                uint32_t c32 = uint32_t(cur), a32 = uint32_t(a);
                std::memcpy(&x, &c32, 4), std::memcpy(&y, &a32, 4);
                float r = op == __SG_A_ADD ? x + y : op == __SG_A_EXCH ? y : x;
                uint32_t o;
                std::memcpy(&o, &r, 4);
                return o;
            }
            double x, y;
            std::memcpy(&x, &cur, 8), std::memcpy(&y, &a, 8);
            double r = op == __SG_A_ADD ? x + y : op == __SG_A_EXCH ? y : x;
            uint64_t o;
            std::memcpy(&o, &r, 8);
            return o;
        }
        int64_t sc = size == 8 ? int64_t(cur) : int64_t(int32_t(uint32_t(cur)));
        int64_t sa = size == 8 ? int64_t(a) : int64_t(int32_t(uint32_t(a)));
        switch (op) {
            case __SG_A_ADD: return (cur + a) & m;
            case __SG_A_SUB: return (cur - a) & m;
            case __SG_A_AND: return cur & a;
            case __SG_A_OR: return cur | a;
            case __SG_A_XOR: return cur ^ a;
            case __SG_A_EXCH: return a & m;
            case __SG_A_CAS: return (cur == (a & m)) ? (b & m) : cur;
            case __SG_A_MIN: return sgn ? (sa < sc ? a & m : cur) : (a < cur ? a & m : cur);
            case __SG_A_MAX: return sgn ? (sa > sc ? a & m : cur) : (a > cur ? a & m : cur);
            case __SG_A_INC: return cur >= a ? 0 : cur + 1;
            case __SG_A_DEC: return (cur == 0 || cur > a) ? a : cur - 1;
            default: return cur;
        }
    };
    *changed = false;
    if (size == 8) {
        uint64_t *p = static_cast<uint64_t *>(addr), cur = __atomic_load_n(p, __ATOMIC_SEQ_CST), nv;
        do {
            nv = apply(cur);
        } while (nv != cur && !__atomic_compare_exchange_n(p, &cur, nv, true, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST));
        *changed = nv != cur;
        return cur;
    }
    if (size == 4) {
        uint32_t *p = static_cast<uint32_t *>(addr), cur = __atomic_load_n(p, __ATOMIC_SEQ_CST), nv;
        do {
            nv = uint32_t(apply(cur));
        } while (nv != cur && !__atomic_compare_exchange_n(p, &cur, nv, true, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST));
        *changed = nv != cur;
        return cur;
    }
    uint16_t *p = static_cast<uint16_t *>(addr), cur = __atomic_load_n(p, __ATOMIC_SEQ_CST), nv;
    do {
        nv = uint16_t(apply(cur));
    } while (nv != cur && !__atomic_compare_exchange_n(p, &cur, nv, true, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST));
    *changed = nv != cur;
    return cur;
}

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

void *__sg_shared(__sg_slot *slot, size_t size, size_t align, size_t elem) {
    Fiber *f = current_fiber();
    Block *B = f->blk;
    unsigned id = __atomic_load_n(&slot->id, __ATOMIC_ACQUIRE);
    if (id == 0) {
        unsigned fresh = g_next_slot_id.fetch_add(1) + 1;
        unsigned expected = 0;
        if (__atomic_compare_exchange_n(&slot->id, &expected, fresh, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
            id = fresh;
        else
            id = expected;
    }
    if (id >= B->slots.size()) B->slots.resize(size_t(id) * 2 + 8);
    SlotState &s = B->slots[id];
    if (s.gen == B->gen) return s.ptr;
    if (align == 0 || (align & (align - 1)) != 0) align = 16;
    size_t off = (B->bump + align - 1) & ~(align - 1);
    size_t limit = B->w->launch->shared_limit;
    if (size > limit || B->used + size > limit || off + size + kRedZone > B->arena_cap) {
        B->w->fail(f, "shared-memory-limit",
                   "the block needs more shared memory than the limit of %zu bytes: __shared__ %s (%s:%d) "
                   "needs %zu bytes, and %zu bytes (%zu of them dynamic) are already in use",
                   limit, slot->name, slot->file, slot->line, size, B->used, size_t(B->w->launch->dyn_shared));
    }
    s.gen = B->gen;
    s.ptr = B->arena + off;
    B->bump = off + size + kRedZone;
    B->used += size;
    B->arrays.push_back(ShArr{off, size, elem ? elem : 1, slot->name});
    std::memset(s.ptr, kPoison, size + kRedZone);
    return s.ptr;
}

void *__sg_dyn_shared(const char *name, size_t elem) {
    Block *B = current_fiber()->blk;
    ShArr &d = B->arrays[0];
    if (!d.name) d.name = name, d.elem = elem ? elem : 1;
    return B->arena + d.off;
}

int __sg_barrier(int kind, int predicate, const char *file, int line) {
    Fiber *f = current_fiber();
    Block *B = f->blk;
    if (kind == 1) B->acc_count += predicate != 0;
    if (kind == 2) B->acc_and &= predicate != 0;
    if (kind == 3) B->acc_or |= predicate != 0;
    f->site_file = file;
    f->site_line = line;
    f->site_op = -1;
    f->state = kAtBarrier;
    ++B->at_barrier;
    B->progress = true;
    B->w->next_in_round(f);
    return kind == 1 ? B->rel_count : kind == 2 ? B->rel_and : kind == 3 ? B->rel_or : 0;
}

unsigned __sg_activemask(void) {
    Fiber *f = current_fiber();
    Block *B = f->blk;
    unsigned wi = f->linear / 32, m = 0;
    for (unsigned l = 0; l < 32 && wi * 32 + l < B->n; ++l)
        if (B->fibers[wi * 32 + l].state != kDone) m |= 1u << l;
    return m;
}

}  // extern "C"

namespace sg {
namespace {
[[noreturn]] void warp_error(Fiber *f, const char *file, int line, const std::string &msg) {
    Finding fd = make_finding(f, "barrier-divergence");
    loc_site(fd.loc, sizeof fd.loc, file, line);
    std::snprintf(fd.msg, sizeof fd.msg, "%s", msg.c_str());
    fatal_finding(f, fd);
}
}  // namespace
}  // namespace sg

extern "C" {

unsigned long long __sg_warp_op(int op, unsigned mask, unsigned long long value, int arg, int width,
                                const char *file, int line) {
    Fiber *f = current_fiber();
    Block *B = f->blk;
    Worker *w = B->w;
    unsigned lane = f->linear % 32, wi = f->linear / 32;
    if (!(mask >> lane & 1))
        warp_error(f, file, line, format("thread %s calls %s at {L} with mask 0x%08x, which does not name its own lane %u",
                                         ids_text(f->hdr->threadIdx).c_str(), warp_op_name(op), mask, lane));
    if (width < 1 || width > 32 || (width & (width - 1)))
        warp_error(f, file, line, format("%s at {L}: width %d is not a power of two from 1 to 32", warp_op_name(op),
                                         width));
    unsigned need = mask & existing_lanes(B, wi);
    for (unsigned l = 0; l < 32; ++l) {
        if (!(need >> l & 1) || B->fibers[wi * 32 + l].state != kDone) continue;
        if (w->launch->checks) {
            Finding fd = make_finding(f, "barrier-divergence");
            loc_site(fd.loc, sizeof fd.loc, file, line);
            std::snprintf(fd.msg, sizeof fd.msg,
                          "thread %s calls %s at {L} with mask 0x%08x, but lane %u of its warp, named in the mask, "
                          "has exited",
                          ids_text(f->hdr->threadIdx).c_str(), warp_op_name(op), mask, l);
            fatal_finding(f, fd);
        }
        need &= ~(1u << l);
    }
    Warp &W = B->warps[wi];
    WarpGroup *g = nullptr;
    for (WarpGroup &x : W.g) {
        if (!x.used) continue;
        if (x.mask == mask) {
            g = &x;
            break;
        }
        if (x.mask & mask)
            warp_error(f, file, line,
                       format("lanes of a warp call warp intrinsics with different, overlapping masks: 0x%08x at {L} "
                              "and 0x%08x at %s:%d",
                              mask, x.mask, x.file, x.line));
    }
    if (!g) {
        for (WarpGroup &x : W.g)
            if (!x.used) {
                g = &x;
                break;
            }
        if (!g) w->fail(f, "unsupported", "more than 4 concurrent warp rendezvous in one warp (%s:%d)", file, line);
        *g = WarpGroup{true, mask, 0, op, width, file, line};
    } else if (g->op != op || (op != __SG_W_SYNC && g->width != width)) {
        warp_error(f, file, line,
                   format("lanes of a warp wait at different warp intrinsics: %s at {L} and %s at %s:%d (mask 0x%08x)",
                          warp_op_name(op), warp_op_name(g->op), g->file, g->line, mask));
    }
    g->arrived |= 1u << lane;
    f->wval = value;
    f->warg = arg;
    f->site_file = file;
    f->site_line = line;
    f->site_op = op;
    if ((g->arrived & need) == need) {
        std::string err = complete_warp(B, wi, *g, f);
        if (!err.empty()) warp_error(f, file, line, err);
        return f->wres;
    }
    f->state = kAtWarp;
    B->progress = true;
    w->next_in_round(f);
    f->state = kRunnable;
    return f->wres;
}

unsigned long long __sg_atomic(int op, void *addr, int size, unsigned long long a, unsigned long long b,
                               const char *file, int line) {
    Fiber *f = current_fiber();
    if (g_checks) check_access(reinterpret_cast<uintptr_t>(addr), unsigned(size), 2, false,
                               reinterpret_cast<uintptr_t>(__builtin_return_address(0)));
    else plain_access(reinterpret_cast<uintptr_t>(addr), unsigned(size), 2,
                      reinterpret_cast<uintptr_t>(__builtin_return_address(0)));
    bool changed = false;
    uint64_t old = do_atomic(op, addr, size, a, b, &changed);
    if (changed) f->blk->progress = true;
    yield_here(f, "an atomic operation", file, line, 0, addr, unsigned(size));
    return old;
}

void __sg_yield_at(int what, const char *file, int line) {
    Fiber *f = current_fiber();
    if (g_checks) {
        Launch *L = f->blk->w->launch;
        release(L, f->blk);
        acquire(L, f->blk);
    }
    yield_here(f, what == __SG_Y_FENCE ? "__threadfence()" : "__nanosleep()", file, line, 0, nullptr, 0);
}

void __sg_trap(const char *file, int line, const char *func) {
    Fiber *f = current_fiber();
    current_worker()->fail(f, "trap", "__trap() at %s:%d in %s", file, line, func);
}

void __sg_unsupported(const char *what, const char *file, int line) {
    Fiber *f = current_fiber();
    current_worker()->fail(f, "unsupported", "not supported by the emulator: %s (%s:%d)", what, file, line);
}

void __sg_assert_fail(const char *expr, const char *file, unsigned int line, const char *func) {
    Fiber *f = current_fiber();
    current_worker()->fail(f, "assert", "device assertion `%s` failed at %s:%u in %s", expr, file, line, func);
}

#if defined(__GLIBC__)
// glibc's assert() calls this; the definition is hidden, so only this module's code binds to it.
__attribute__((noreturn, visibility("hidden"))) void __assert_fail(const char *expr, const char *file,
                                                                     unsigned int line, const char *func) {
    __sg_assert_fail(expr, file, line, func);
}
#endif

// Device printf (the prelude renames printf): captured, capped, until Python takes it.
int __sg_printf(const char *fmt, ...) {
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    int n = std::vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n > 0) append_output(buf, std::min(size_t(n), sizeof buf - 1));
    return n;
}

}  // extern "C"

// ---------------------------------------------------------------------------------------------
// Memory-access hooks: the entry points of GCC's -fsanitize=thread instrumentation. Volatile
// accesses and atomics are yield points; with checks on, every access is checked.
// ---------------------------------------------------------------------------------------------
#define SG_PC reinterpret_cast<uintptr_t>(__builtin_return_address(0))
// Checked: everything; plain: shared-memory bounds only (a range test, then the array table).
#define SG_ACCESS(a, n, kind)                                                                         \
    if (__builtin_expect(g_profile, 0)) profile_access(reinterpret_cast<uintptr_t>(a), n, kind, SG_PC);   \
    if (__builtin_expect(g_checks, 0)) check_access(reinterpret_cast<uintptr_t>(a), n, kind, false, SG_PC); \
    else plain_access(reinterpret_cast<uintptr_t>(a), n, kind, SG_PC)
#define SG_PLAIN(n)                                                                                   \
    SG_HOOK void __tsan_read##n(void *a) { SG_ACCESS(a, n, 0); }                                      \
    SG_HOOK void __tsan_write##n(void *a) { SG_ACCESS(a, n, 1); }                                     \
    SG_HOOK void __tsan_unaligned_read##n(void *a) { SG_ACCESS(a, n, 0); }                            \
    SG_HOOK void __tsan_unaligned_write##n(void *a) { SG_ACCESS(a, n, 1); }                           \
    SG_HOOK void __tsan_volatile_read##n(void *a) {                                                   \
        if (!on_fiber()) return;                                                                      \
        if (g_profile) profile_access(reinterpret_cast<uintptr_t>(a), n, 0, SG_PC); \
        if (g_checks) check_access(reinterpret_cast<uintptr_t>(a), n, 0, true, SG_PC);               \
        else plain_access(reinterpret_cast<uintptr_t>(a), n, 0, SG_PC);                               \
        yield_here(current_fiber(), "a volatile load", nullptr, 0, SG_PC, a, n);                      \
    }                                                                                                 \
    SG_HOOK void __tsan_volatile_write##n(void *a) {                                                  \
        if (!on_fiber()) return;                                                                      \
        if (g_profile) profile_access(reinterpret_cast<uintptr_t>(a), n, 1, SG_PC); \
        if (g_checks) check_access(reinterpret_cast<uintptr_t>(a), n, 1, true, SG_PC);               \
        else plain_access(reinterpret_cast<uintptr_t>(a), n, 1, SG_PC);                               \
        current_fiber()->blk->progress = true;                                                        \
    }
SG_PLAIN(1)
SG_PLAIN(2)
SG_PLAIN(4)
SG_PLAIN(8)
SG_PLAIN(16)
#undef SG_PLAIN

SG_HOOK void __tsan_read_range(void *a, size_t n) {
    if (n) { SG_ACCESS(a, 1, 0); SG_ACCESS(static_cast<char *>(a) + n - 1, 1, 0); }
}
SG_HOOK void __tsan_write_range(void *a, size_t n) {
    if (n) { SG_ACCESS(a, 1, 1); SG_ACCESS(static_cast<char *>(a) + n - 1, 1, 1); }
}
SG_HOOK void __tsan_init(void) {}
SG_HOOK void __tsan_func_entry(void *) {}
SG_HOOK void __tsan_func_exit(void) {}
SG_HOOK void __tsan_vptr_update(void **, void *) {}
SG_HOOK void __tsan_vptr_read(void **) {}

// Atomics written with __atomic builtins or std::atomic in device code: done, then a yield point.
static void atomic_hook(void *a, unsigned n, uintptr_t pc, bool wrote) {
    if (!on_fiber()) return;
    Fiber *f = current_fiber();
    if (g_checks) check_access(reinterpret_cast<uintptr_t>(a), n, 2, false, pc);
    else plain_access(reinterpret_cast<uintptr_t>(a), n, 2, pc);
    if (wrote) f->blk->progress = true;
    yield_here(f, "an atomic operation", nullptr, 0, pc, a, n);
}

#define SG_ATOMICS(bits, T)                                                                           \
    SG_HOOK T __tsan_atomic##bits##_load(const volatile T *a, int) {                                  \
        T v = __atomic_load_n(a, __ATOMIC_SEQ_CST);                                                   \
        atomic_hook((void *)a, sizeof(T), SG_PC, false);                                              \
        return v;                                                                                     \
    }                                                                                                 \
    SG_HOOK void __tsan_atomic##bits##_store(volatile T *a, T v, int) {                               \
        __atomic_store_n(a, v, __ATOMIC_SEQ_CST);                                                     \
        atomic_hook((void *)a, sizeof(T), SG_PC, true);                                               \
    }                                                                                                 \
    SG_ATOMIC_RMW(bits, T, exchange, __atomic_exchange_n(a, v, __ATOMIC_SEQ_CST))                     \
    SG_ATOMIC_RMW(bits, T, fetch_add, __atomic_fetch_add(a, v, __ATOMIC_SEQ_CST))                     \
    SG_ATOMIC_RMW(bits, T, fetch_sub, __atomic_fetch_sub(a, v, __ATOMIC_SEQ_CST))                     \
    SG_ATOMIC_RMW(bits, T, fetch_and, __atomic_fetch_and(a, v, __ATOMIC_SEQ_CST))                     \
    SG_ATOMIC_RMW(bits, T, fetch_or, __atomic_fetch_or(a, v, __ATOMIC_SEQ_CST))                       \
    SG_ATOMIC_RMW(bits, T, fetch_xor, __atomic_fetch_xor(a, v, __ATOMIC_SEQ_CST))                     \
    SG_ATOMIC_RMW(bits, T, fetch_nand, __atomic_fetch_nand(a, v, __ATOMIC_SEQ_CST))                   \
    SG_HOOK int __tsan_atomic##bits##_compare_exchange_strong(volatile T *a, T *c, T v, int, int) {   \
        int ok = __atomic_compare_exchange_n(a, c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);     \
        atomic_hook((void *)a, sizeof(T), SG_PC, ok);                                                 \
        return ok;                                                                                    \
    }                                                                                                 \
    SG_HOOK int __tsan_atomic##bits##_compare_exchange_weak(volatile T *a, T *c, T v, int, int) {     \
        int ok = __atomic_compare_exchange_n(a, c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);     \
        atomic_hook((void *)a, sizeof(T), SG_PC, ok);                                                 \
        return ok;                                                                                    \
    }                                                                                                 \
    SG_HOOK T __tsan_atomic##bits##_compare_exchange_val(volatile T *a, T c, T v, int, int) {         \
        bool ok = __atomic_compare_exchange_n(a, &c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);   \
        atomic_hook((void *)a, sizeof(T), SG_PC, ok);                                                 \
        return c;                                                                                     \
    }
#define SG_ATOMIC_RMW(bits, T, name, expr)                                                            \
    SG_HOOK T __tsan_atomic##bits##_##name(volatile T *a, T v, int) {                                 \
        T old = expr;                                                                                 \
        atomic_hook((void *)a, sizeof(T), SG_PC, true);                                               \
        return old;                                                                                   \
    }
SG_ATOMICS(8, unsigned char)
SG_ATOMICS(16, unsigned short)
SG_ATOMICS(32, unsigned int)
SG_ATOMICS(64, unsigned long long)
#undef SG_ATOMICS
#undef SG_ATOMIC_RMW

SG_HOOK void __tsan_atomic_thread_fence(int) {
    if (!on_fiber()) return;
    Fiber *f = current_fiber();
    if (g_checks) release(f->blk->w->launch, f->blk), acquire(f->blk->w->launch, f->blk);
    yield_here(f, "a fence", nullptr, 0, SG_PC, nullptr, 0);
}
SG_HOOK void __tsan_atomic_signal_fence(int) {}

// A shift by the width of its type or more (GCC's -fsanitize=shift-exponent, UBSan's data layout):
// undefined in C++; x86 takes the count mod 32, a GPU clamps it (PTX shl/shr: 0, or -1 for a
// negative value shifted right). The emulator cannot give the GPU's value, so the thread fails.
struct UbsanType {
    uint16_t kind, info;  // info of an integer type: log2(bits) << 1 | signed
    char name[1];
};
struct UbsanShift {
    const char *file;
    uint32_t line, column;
    const UbsanType *lhs, *rhs;
};
[[noreturn]] static void bad_shift(const UbsanShift *d, uintptr_t rhs) {
    unsigned bits = 1u << (d->lhs->info >> 1);
    unsigned rbits = 1u << (d->rhs->info >> 1);
    long long amount = (long long)rhs;
    if ((d->rhs->info & 1) && rbits < 64) amount = (long long)(int64_t(uint64_t(rhs) << (64 - rbits)) >> (64 - rbits));
    Fiber *f = current_fiber();
    Finding fd = make_finding(f, "undefined-shift");
    loc_site(fd.loc, sizeof fd.loc, d->file, int(d->line));
    std::snprintf(fd.msg, sizeof fd.msg,
                  "shift by %lld of a %u-bit value at %s: undefined in C++; a GPU gives 0 here (-1 for a negative "
                  "value shifted right: PTX clamps shift amounts to %u), x86 takes the amount mod %u; check the "
                  "operator precedence of the shift (`+` binds tighter than `>>`: GPU Gems' CONFLICT_FREE_OFFSET "
                  "needs parentheses)",
                  amount, bits, fd.loc, bits, bits);
    fatal_finding(f, fd);
}
SG_HOOK void __ubsan_handle_shift_out_of_bounds(void *data, uintptr_t, uintptr_t rhs) {
    if (on_fiber()) bad_shift(static_cast<const UbsanShift *>(data), rhs);
}
SG_HOOK void __ubsan_handle_shift_out_of_bounds_abort(void *data, uintptr_t, uintptr_t rhs) {
    if (on_fiber()) bad_shift(static_cast<const UbsanShift *>(data), rhs);
    std::abort();
}

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

// Frees every worker's fiber stacks and arenas (they are re-created by the next launch).
SG_EXPORT void sg_trim(void) {
    std::lock_guard<std::mutex> lock(g_launch_mu);
    g_workers.clear();
}

// Device printf output since the last call (at most cap - 1 bytes, NUL-terminated); returns its
// length, or -1 - length when output was cut at the cap.
SG_EXPORT long sg_take_output(char *buf, long cap) {
    std::lock_guard<std::mutex> lock(g_out_mu);
    size_t n = std::min(g_out.size(), size_t(cap > 0 ? cap - 1 : 0));
    std::memcpy(buf, g_out.data(), n);
    buf[n] = '\0';
    bool cut = g_out_cut;
    g_out.clear();
    g_out_cut = false;
    return cut ? -1 - long(n) : long(n);
}

// The findings of the last launch, one a line, tab-separated:
// kind, loc, other, block, thread, other block, other thread, has_other, block_linear, message.
std::string g_findings_text;
SG_EXPORT long sg_findings(char *buf, long cap) {
    size_t n = std::min(g_findings_text.size(), size_t(cap > 0 ? cap - 1 : 0));
    std::memcpy(buf, g_findings_text.data(), n);
    buf[n] = '\0';
    return long(g_findings_text.size());
}

int find_segments(struct dl_phdr_info *info, size_t, void *) {
    uintptr_t probe = reinterpret_cast<uintptr_t>(&g_kernels);
    std::vector<std::pair<uintptr_t, uintptr_t>> segs;
    bool mine = false;
    for (int i = 0; i < info->dlpi_phnum; ++i) {
        const ElfW(Phdr) &ph = info->dlpi_phdr[i];
        if (ph.p_type != PT_LOAD) continue;
        uintptr_t lo = info->dlpi_addr + ph.p_vaddr, hi = lo + ph.p_memsz;
        segs.emplace_back(lo, hi);
        if (probe >= lo && probe < hi) mine = true;
    }
    if (!mine) return 0;
    g_segments = segs;
    g_module_base = info->dlpi_addr;
    return 1;
}

// The executor's threads (see sg_thread_pool in sg_host.h), or null: the runtime starts its own.
const sg_thread_pool *g_pool = nullptr;

SG_EXPORT void sg_set_thread_pool(const sg_thread_pool *pool) { g_pool = pool; }

void run_pooled_worker(void *worker) {
    Worker *w = static_cast<Worker *>(worker);
    w->run(w->launch);
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
    L->seed = cfg->seed;
    L->checks = cfg->checks != 0;
    L->detect_deadlock = cfg->detect_deadlock != 0;
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
    static uint32_t next_inst = 1;
    if (uint64_t(next_inst) + L->nblocks >= 0xF0000000ull) next_inst = 1;  // wrap: rare, loses nothing
    L->inst_base = next_inst;
    next_inst += uint32_t(L->nblocks) + 1;
    if (!g_module_base) dl_iterate_phdr(&find_segments, nullptr);
    std::vector<std::pair<void *, size_t>> shadows;
    if (L->checks) {
        for (int i = 0; i < cfg->nallocs; ++i) {
            const sg_alloc &c = cfg->allocs[i];
            Alloc a{uintptr_t(c.base), uintptr_t(c.size), nullptr, 0, c.lo, c.count, c.elem, {0}};
            std::memcpy(a.name, c.name, sizeof a.name - 1);
            if (a.elem && (a.lo + a.count) * a.elem > a.size) a.elem = 0;  // a label that does not fit: ignored
            size_t len = (a.size + 3) / 4 * sizeof(Cell);
            if (len) {
                void *m = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
                if (m != MAP_FAILED) a.shadow = static_cast<Cell *>(m), a.shadow_len = len, shadows.emplace_back(m, len);
            }
            L->allocs.push_back(a);
        }
        std::sort(L->allocs.begin(), L->allocs.end(), [](const Alloc &x, const Alloc &y) { return x.base < y.base; });
        if (L->nblocks <= (1u << 22)) {
            L->rel_ring = new std::atomic<uint32_t>[L->nblocks * 8]();
            L->rel_pos = new std::atomic<uint8_t>[L->nblocks]();
        }
    }
    uint64_t want = std::max(1, cfg->workers);
    unsigned nworkers = unsigned(std::min<uint64_t>(std::min<uint64_t>(want, L->nblocks), 64));
    while (g_workers.size() < nworkers) {
        g_workers.emplace_back(new Worker());
        g_workers.back()->id = unsigned(g_workers.size() - 1);
    }
    L->nworkers = nworkers;
    for (unsigned i = 0; i < nworkers; ++i) {
        Worker *w = g_workers[i].get();
        w->launch = L.get();
        w->idle.store(false);
        w->stuck.store(0);
        w->progress.store(0);
        L->workers[i] = w;
    }

    install_fault_handlers();
    g_checks = L->checks;
    profile_launch_begin(L.get(), cfg);
    g_active.store(1);
    std::vector<std::thread> threads;
    std::vector<void *> pooled;  // with the executor's pool: its threads, made before the filter went on
    for (unsigned i = 1; g_pool && i < nworkers; ++i) pooled.push_back(g_workers[i].get());
    int started = pooled.empty() ? 0 : std::max(0, g_pool->start(&run_pooled_worker, pooled.data(), int(pooled.size())));
    for (unsigned i = 1 + unsigned(started); g_pool && i < nworkers; ++i) g_workers[i]->idle.store(true);
    for (unsigned i = 1; !g_pool && i < nworkers; ++i) {
        try {
            Worker *w = g_workers[i].get();
            Launch *lp = L.get();
            threads.emplace_back([w, lp] { w->run(lp); });
        } catch (const std::exception &) {
            g_workers[i]->idle.store(true);  // fewer OS threads: the others take the remaining blocks
        }
    }
    g_workers[0]->run(L.get());
    if (started) g_pool->wait();
    for (std::thread &t : threads) t.join();
    g_active.store(0);
    g_checks = 0;
    profile_launch_end();
    remove_fault_handlers();
    for (auto &s : shadows) munmap(s.first, s.second);
    delete[] L->rel_ring;
    delete[] L->rel_pos;
    for (unsigned i = 0; i < nworkers; ++i)
        for (auto &s : g_workers[i]->slots)
            if (s) s->busy = false;

    // Findings: ordered by block, then by discovery.
    std::sort(L->findings.begin(), L->findings.end(), [](const Finding &a, const Finding &b) {
        return a.block_linear != b.block_linear ? a.block_linear < b.block_linear : a.seq < b.seq;
    });
    g_findings_text.clear();
    for (const Finding &fd : L->findings) {
        g_findings_text += format("%s\t%s\t%s\t%u,%u,%u\t%u,%u,%u\t%u,%u,%u\t%u,%u,%u\t%d\t%llu\t", fd.kind, fd.loc,
                                  fd.other, fd.block.x, fd.block.y, fd.block.z, fd.thread.x, fd.thread.y, fd.thread.z,
                                  fd.oblock.x, fd.oblock.y, fd.oblock.z, fd.othread.x, fd.othread.y, fd.othread.z,
                                  fd.has_other, (unsigned long long)fd.block_linear);
        std::string m(fd.msg);
        for (char &c : m)
            if (c == '\n' || c == '\t') c = ' ';
        g_findings_text += m + "\n";
    }
    res->nfindings = int(L->findings.size());

    if (L->error.set) {
        ErrorRecord &e = L->error;
        std::string msg(e.message);
        if (e.has_ids)
            msg += format(" (block (%u, %u, %u), thread (%u, %u, %u))", e.block.x, e.block.y, e.block.z, e.thread.x,
                          e.thread.y, e.thread.z);
        set_result(res, SG_KERNEL_ERROR, e.kind, msg);
        res->nfindings = int(L->findings.size());
        if (e.has_ids) {
            res->has_ids = 1;
            res->block[0] = e.block.x, res->block[1] = e.block.y, res->block[2] = e.block.z;
            res->thread[0] = e.thread.x, res->thread[1] = e.thread.y, res->thread[2] = e.thread.z;
        }
        return res->status;
    }
    return SG_OK;
}
