// The runtime, memory level: the -fsanitize=thread and shift-exponent hooks.
#include "memory/access.h"
#include "checks/findings.h"
#include "block/rounds.h"
#include "profile/profile.h"

using namespace sg::rt;

// ---------------------------------------------------------------------------------------------
// Memory-access hooks: the entry points of GCC's -fsanitize=thread instrumentation. Volatile
// accesses and atomics are yield points; with checks on, every access is checked.
// ---------------------------------------------------------------------------------------------
#define SG_PC reinterpret_cast<uintptr_t>(__builtin_return_address(0))
// In a checked block: everything; plain: shared-memory bounds only (a range test, then the array
// table). Whether the block is checked is its own flag (Block::checked), read through the fiber.
#define SG_ACCESS(a, n, kind)                                                                         \
    if (__builtin_expect(g_profile, 0)) profile_access(reinterpret_cast<uintptr_t>(a), n, kind, SG_PC);   \
    memory_access(reinterpret_cast<uintptr_t>(a), n, kind, SG_PC)
#define SG_PLAIN(n)                                                                                   \
    SG_HOOK void __tsan_read##n(void *a) { SG_ACCESS(a, n, 0); }                                      \
    SG_HOOK void __tsan_write##n(void *a) { SG_ACCESS(a, n, 1); }                                     \
    SG_HOOK void __tsan_unaligned_read##n(void *a) { SG_ACCESS(a, n, 0); }                            \
    SG_HOOK void __tsan_unaligned_write##n(void *a) { SG_ACCESS(a, n, 1); }                           \
    SG_HOOK void __tsan_volatile_read##n(void *a) {                                                   \
        if (!on_fiber()) return;                                                                      \
        bool checked = current_fiber()->blk->checked;                                                 \
        if (g_profile) profile_access(reinterpret_cast<uintptr_t>(a), n, 0, SG_PC, 1); \
        if (checked) check_access(reinterpret_cast<uintptr_t>(a), n, 0, true, SG_PC);                \
        else plain_access(reinterpret_cast<uintptr_t>(a), n, 0, SG_PC);                               \
        yield_here(current_fiber(), "a volatile load", nullptr, 0, SG_PC, a, n);                      \
        if (checked) volatile_loaded(reinterpret_cast<uintptr_t>(a), n, SG_PC);                      \
    }                                                                                                 \
    SG_HOOK void __tsan_volatile_write##n(void *a) {                                                  \
        if (!on_fiber()) return;                                                                      \
        if (g_profile) profile_access(reinterpret_cast<uintptr_t>(a), n, 1, SG_PC); \
        if (current_fiber()->blk->checked) check_access(reinterpret_cast<uintptr_t>(a), n, 1, true, SG_PC); \
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
// memcpy, memmove, memset of student code (prelude.h binds the names to these, so the calls the
// compiler makes for them come here too): a libc call would touch device and shared memory unseen by
// the checks and the profile. Each byte range is checked and profiled as the loop of aligned loads and
// stores of up to 8 bytes that copies it, at the caller's line; then libc does the work.
static void range_accesses(const void *a, size_t n, int kind, uintptr_t pc) {
    uintptr_t p = reinterpret_cast<uintptr_t>(a), end = p + n;
    while (p < end) {
        unsigned size = 8;
        while (size > 1 && ((p & (size - 1)) || p + size > end)) size >>= 1;
        if (g_profile) profile_access(p, size, kind, pc);
        memory_access(p, size, kind, pc);
        p += size;
    }
}
void *__sg_memcpy(void *dst, const void *src, size_t n) {
    if (on_fiber()) range_accesses(src, n, 0, SG_PC), range_accesses(dst, n, 1, SG_PC);
    return std::memcpy(dst, src, n);
}
void *__sg_memmove(void *dst, const void *src, size_t n) {
    if (on_fiber()) range_accesses(src, n, 0, SG_PC), range_accesses(dst, n, 1, SG_PC);
    return std::memmove(dst, src, n);
}
void *__sg_memset(void *dst, int value, size_t n) {
    if (on_fiber()) range_accesses(dst, n, 1, SG_PC);
    return std::memset(dst, value, n);
}

// The steps (profile/profile.h) of the calling thread so far, where the profile counts them; else 0.
static uint64_t *own_steps() {
    if (!g_profile || !on_fiber()) return nullptr;
    Fiber *f = current_fiber();
    Block *B = f->blk;
    if (g_profile_max_blocks && B->linear >= g_profile_max_blocks) return nullptr;
    ProfBlock *P = prof_block(B);
    return f->linear < P->steps.size() ? &P->steps[f->linear] : nullptr;
}
// Hopper's bulk copy (ptx.py) is one instruction of the issuing thread on a GPU; its emulation is a
// loop of that thread's loads and stores, checked and profiled (bytes, sectors) as such. Its steps:
// one. __sg_steps_mark() before the loop, __sg_steps_one_since(mark) after it.
unsigned long long __sg_steps_mark(void) {
    uint64_t *steps = own_steps();
    return steps ? *steps : 0;
}
void __sg_steps_one_since(unsigned long long mark) {
    uint64_t *steps = own_steps();
    if (steps && *steps > mark) *steps = mark + 1;
}

SG_HOOK void __tsan_init(void) {}
SG_HOOK void __tsan_func_entry(void *) {}
SG_HOOK void __tsan_func_exit(void) {}
SG_HOOK void __tsan_vptr_update(void **, void *) {}
SG_HOOK void __tsan_vptr_read(void **) {}

// Atomics written with __atomic builtins (std::atomic, <cuda/atomic>, the inline PTX of ptx.py) in
// device code: their bounds checked first, then the operation (sequentially consistent here) and its
// check under the launch's order lock (memory/access.h, OrderLock, atomic_order), then a yield point.
// `mo`: the memory order the code asked for (GCC's __ATOMIC_* values; GCC may add HLE flags above
// the low bits); the scope is the one __sg_scope gave just before (else .gpu).
namespace {
struct AtomicHook {
    Fiber *f = nullptr;
    void *a;
    unsigned n;
    uintptr_t pc;
    AtomicOp op;
    bool checked = false;  // after its bounds check (a sampled block's share of checks may end there)
    OrderLock lock;
    AtomicHook(const volatile void *addr, unsigned size, uintptr_t at, int mo, bool reads, bool rmw)
        : a(const_cast<void *>(addr)), n(size), pc(at), op{mo & 0xffff, __SG_SCOPE_DEVICE, reads, rmw, false, {}} {
        if (!on_fiber()) return;
        f = current_fiber();
        if (g_profile) profile_step(f, reinterpret_cast<uintptr_t>(a));  // a step of the thread (profile/profile.h), in no bank count
        op.scope = f->scope_next;
        f->scope_next = __SG_SCOPE_DEVICE;
        if (!f->blk->checked) {
            plain_access(reinterpret_cast<uintptr_t>(a), n, 2, pc);
            return;
        }
        check_access(reinterpret_cast<uintptr_t>(a), n, 2, false, pc);  // bounds, alignment (may end the thread)
        checked = f->blk->checked;
        lock.take(f);
        if (checked) words_before(op, a, n);
    }
    // After the operation: `wrote` whether it changed memory (a store always).
    void done(bool wrote) {
        if (!f) return;
        if (checked) {
            op.wrote = wrote;
            atomic_order(f, reinterpret_cast<uintptr_t>(a), n, op, pc);
            lock.release();
        }
        if (wrote) f->blk->progress = true;
        yield_here(f, "an atomic operation", nullptr, 0, pc, a, n);
    }
    // After done: a load given an older value of its word (checks/races.cpp, give_stale) returns it in *v.
    void stale(void *v, unsigned size) {
        if (!f || !f->stale_ready) return;
        f->stale_ready = false;
        std::memcpy(v, f->stale_val, size);
    }
};
}  // namespace

#define SG_ATOMICS(bits, T)                                                                           \
    SG_HOOK T __tsan_atomic##bits##_load(const volatile T *a, int mo) {                               \
        AtomicHook h(a, sizeof(T), SG_PC, mo, true, false);                                           \
        T v = __atomic_load_n(a, __ATOMIC_SEQ_CST);                                                   \
        h.done(false);                                                                                \
        h.stale(&v, sizeof v);                                                                        \
        return v;                                                                                     \
    }                                                                                                 \
    SG_HOOK void __tsan_atomic##bits##_store(volatile T *a, T v, int mo) {                            \
        AtomicHook h(a, sizeof(T), SG_PC, mo, false, false);                                          \
        __atomic_store_n(a, v, __ATOMIC_SEQ_CST);                                                     \
        h.done(true);                                                                                 \
    }                                                                                                 \
    SG_ATOMIC_RMW(bits, T, exchange, __atomic_exchange_n(a, v, __ATOMIC_SEQ_CST))                     \
    SG_ATOMIC_RMW(bits, T, fetch_add, __atomic_fetch_add(a, v, __ATOMIC_SEQ_CST))                     \
    SG_ATOMIC_RMW(bits, T, fetch_sub, __atomic_fetch_sub(a, v, __ATOMIC_SEQ_CST))                     \
    SG_ATOMIC_RMW(bits, T, fetch_and, __atomic_fetch_and(a, v, __ATOMIC_SEQ_CST))                     \
    SG_ATOMIC_RMW(bits, T, fetch_or, __atomic_fetch_or(a, v, __ATOMIC_SEQ_CST))                       \
    SG_ATOMIC_RMW(bits, T, fetch_xor, __atomic_fetch_xor(a, v, __ATOMIC_SEQ_CST))                     \
    SG_ATOMIC_RMW(bits, T, fetch_nand, __atomic_fetch_nand(a, v, __ATOMIC_SEQ_CST))                   \
    SG_HOOK int __tsan_atomic##bits##_compare_exchange_strong(volatile T *a, T *c, T v, int mo, int) {   \
        AtomicHook h(a, sizeof(T), SG_PC, mo, true, true);                                            \
        int ok = __atomic_compare_exchange_n(a, c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);     \
        h.done(ok && *c != v);                                                                        \
        return ok;                                                                                    \
    }                                                                                                 \
    SG_HOOK int __tsan_atomic##bits##_compare_exchange_weak(volatile T *a, T *c, T v, int mo, int) {     \
        AtomicHook h(a, sizeof(T), SG_PC, mo, true, true);                                            \
        int ok = __atomic_compare_exchange_n(a, c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);     \
        h.done(ok && *c != v);                                                                        \
        return ok;                                                                                    \
    }                                                                                                 \
    SG_HOOK T __tsan_atomic##bits##_compare_exchange_val(volatile T *a, T c, T v, int mo, int) {      \
        AtomicHook h(a, sizeof(T), SG_PC, mo, true, true);                                            \
        T expect = c;                                                                                 \
        bool ok = __atomic_compare_exchange_n(a, &c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);   \
        h.done(ok && expect != v);                                                                    \
        return c;                                                                                     \
    }
// A read-modify-write that leaves the word as it was stores nothing (atomic_order: a load).
#define SG_ATOMIC_RMW(bits, T, name, expr)                                                            \
    SG_HOOK T __tsan_atomic##bits##_##name(volatile T *a, T v, int mo) {                              \
        AtomicHook h(a, sizeof(T), SG_PC, mo, true, true);                                            \
        T old = expr;                                                                                 \
        h.done(__atomic_load_n(a, __ATOMIC_RELAXED) != old);                                          \
        return old;                                                                                   \
    }
SG_ATOMICS(8, unsigned char)
SG_ATOMICS(16, unsigned short)
SG_ATOMICS(32, unsigned int)
SG_ATOMICS(64, unsigned long long)
#undef SG_ATOMICS
#undef SG_ATOMIC_RMW

// std::atomic_thread_fence / cuda::atomic_thread_fence: a fence of the scope __sg_scope gave (else
// .gpu) unless relaxed (PTX has no weaker fence than fence.acq_rel, which CCCL emits for acquire and
// release fences alike: both acquire and release here).
SG_HOOK void __tsan_atomic_thread_fence(int mo) {
    if (!on_fiber()) return;
    Fiber *f = current_fiber();
    int scope = f->scope_next;
    f->scope_next = __SG_SCOPE_DEVICE;
    if (f->blk->checked && (mo & 0xffff) != __ATOMIC_RELAXED) fence(f, scope);
    yield_here(f, "a fence", nullptr, 0, SG_PC, nullptr, 0);
}
SG_HOOK void __tsan_atomic_signal_fence(int) {}

// A shift the rewrite handed to the prelude's helpers (prelude.h, __sg_shift_do) whose amount is the
// width of its type or more, or negative: the helper gives PTX's value (0, or -1 for a negative value
// shifted right) and this records a finding that does not stop the thread (kind shift-clamped). One
// finding per line and launch: the first thread's (lowest block, then lowest thread), so its message
// (the amount) is the same whatever the schedule or the number of workers. Each worker remembers the
// best thread it has seen per line (a thread that cannot be the first returns at once); the launch's
// list of findings decides under its lock.
namespace {
struct ClampSeen {
    const char *file;
    int line;
    uint64_t rank;
};
struct ClampTable {
    uint32_t launch = 0;
    ClampSeen e[64];
};
thread_local ClampTable t_clamped;

uint64_t thread_rank(const Launch *L, uint64_t block, uint3 t) {
    return (block << 10) | (t.x + L->block.x * (t.y + L->block.y * t.z));
}

// This worker's entry for (file, line) in this launch (made on first use), or null when the table is full.
ClampSeen *clamp_seen(const Launch *L, const char *file, int line) {
    ClampTable &seen = t_clamped;
    if (seen.launch != L->inst_base) {
        std::memset(seen.e, 0, sizeof seen.e);
        seen.launch = L->inst_base;
    }
    uint64_t h = mix(reinterpret_cast<uintptr_t>(file), uint64_t(uint32_t(line)));
    for (unsigned i = 0; i < 64; ++i) {
        ClampSeen &e = seen.e[(h + i) % 64];
        if (e.file == file && e.line == line) return &e;
        if (!e.file) {
            e.file = file, e.line = line, e.rank = UINT64_MAX;
            return &e;
        }
    }
    return nullptr;
}

// The finding's message: the shift, where (the macro it is in), the GPU's value, and advice (flags:
// 1 a right shift, 2 or 4 an amount with + or - outside brackets, 8 a compound assignment, 16 a
// signed amount).
void clamped_message(Finding &fd, int flags, int use_line, const char *macro, unsigned long long amount, int bits,
                     int result) {
    const char *op = (flags & 1) ? ((flags & 8) ? ">>=" : ">>") : ((flags & 8) ? "<<=" : "<<");
    char by[32], where[256] = "", advice[200] = "";
    if ((flags & 16) && (long long)amount < 0) std::snprintf(by, sizeof by, "%lld", (long long)amount);
    else std::snprintf(by, sizeof by, "%llu", amount);
    if (macro) std::snprintf(where, sizeof where, " (in macro %s, used at line %d)", macro, use_line);
    if (flags & 6)
        std::snprintf(advice, sizeof advice, ", so check the operator precedence: %s binds tighter than %s%s",
                      (flags & 2) ? "+" : "-", op,
                      (flags & 1) ? " (GPU Gems' CONFLICT_FREE_OFFSET needs parentheses)" : "");
    else
        std::snprintf(advice, sizeof advice, " (x86 takes the amount mod %d): do not rely on it", bits);
    std::snprintf(fd.msg, sizeof fd.msg,
                  "shift by %s of a %d-bit value at %s%s gives %d, as on a GPU (PTX clamps shift amounts to %d); "
                  "C++ leaves it undefined%s",
                  by, bits, fd.loc, where, result, bits, advice);
}

// Keeps fd (of the thread of `rank`) as the launch's finding of its line where it is the first
// thread's: it replaces a later thread's, or is added (`mine`: this worker's entry, told the best rank).
void keep_first_clamped(Launch *L, Finding fd, uint64_t rank, ClampSeen *mine) {
    std::lock_guard<std::mutex> lock(L->fmu);
    for (Finding &o : L->findings) {
        if (o.kind != fd.kind || std::strcmp(o.loc, fd.loc)) continue;
        uint64_t theirs = thread_rank(L, o.block_linear, o.thread);
        if (rank < theirs) fd.seq = o.seq, o = fd;
        if (mine) mine->rank = std::min(rank, theirs);
        return;
    }
    if (mine) mine->rank = rank;
    if (L->findings.size() >= kMaxFindings) {
        ++L->fdropped;
        return;
    }
    L->findings.push_back(fd);
    L->findings.back().seq = L->fseq++;
}
}  // namespace

extern "C" void __sg_shift_clamped(const char *file, int line, int flags, int use_line, const char *macro,
                                   unsigned long long amount, int bits, int result) {
    if (!on_fiber()) return;  // a static initialiser: nothing to report it to
    Fiber *f = current_fiber();
    Block *B = f->blk;
    Launch *L = B->w->launch;
    uint64_t rank = thread_rank(L, B->linear, f->hdr->threadIdx);
    ClampSeen *mine = clamp_seen(L, file, line);
    if (mine && rank >= mine->rank) return;  // a thread before it was already reported
    Finding fd = make_finding(f, Kind::shift_clamped);
    loc_site(fd.loc, sizeof fd.loc, file, line);
    clamped_message(fd, flags, use_line, macro, amount, bits, result);
    keep_first_clamped(L, fd, rank, mine);
}

// A shift by the width of its type or more that the rewrite did not hand to the helpers (GCC's
// -fsanitize=shift-exponent, UBSan's data layout; a backstop): undefined in C++; x86 takes the count
// mod 32, a GPU clamps it (PTX shl/shr: 0, or -1 for a negative value shifted right). The emulator
// cannot give the GPU's value here, so the thread fails.
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
    Finding fd = make_finding(f, Kind::undefined_shift);
    loc_site(fd.loc, sizeof fd.loc, d->file, int(d->line));
    std::snprintf(fd.msg, sizeof fd.msg,
                  "shift by %lld of a %u-bit value at %s: undefined in C++; a GPU gives 0 here (-1 for a negative "
                  "value shifted right: PTX clamps shift amounts to %u), x86 takes the amount mod %u",
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
