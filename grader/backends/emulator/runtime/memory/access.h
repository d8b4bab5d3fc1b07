// The runtime, memory level: the path of every load and store of a kernel (the hooks of
// memory/hooks.cpp), the order lock of strong operations and the declarations of the checks.
#pragma once

#include "grid/launch.h"
#include "grid/schedule.h"
#include "block/loops.h"

namespace sg::rt {

// ---------------------------------------------------------------------------------------------
// Yield points and the checks of every memory access.
// ---------------------------------------------------------------------------------------------
inline bool on_fiber() { return g_active.load(std::memory_order_relaxed) != 0; }

// Defined in checks/ (the checks) and memory/atomics.cpp (do_atomic).
void fence(Fiber *f, int scope);
void settle_volatile(Fiber *f);
bool word_in_flight(Launch *L, const Fiber *f, const Pub *p, bool loads);
struct AtomicOp;
void atomic_order(Fiber *f, uintptr_t addr, unsigned size, const AtomicOp &op, uintptr_t pc);
Alloc *find_alloc(Launch *L, uintptr_t addr);
void shared_bounds(Fiber *f, Block *B, uintptr_t addr, unsigned size, int kind, uintptr_t pc);
void volatile_loaded(uintptr_t addr, unsigned size, uintptr_t pc);
Worker *current_worker();
uint64_t do_atomic(int opf, void *addr, int size, uint64_t a, uint64_t b, bool *changed);

// ---- the PTX memory model between blocks ------------------------------------------------------
// Sources: the PTX ISA, chapter "Memory Consistency Model" (strong and weak operations, scopes,
// morally strong, release and acquire patterns, causality order, data race); Lustig, Sahasrabuddhe
// and Giroux, "A Formal Analysis of the NVIDIA PTX Memory Consistency Model", ASPLOS 2019; Merrill
// and Garland, "Single-pass Parallel Prefix Scan with Decoupled Look-back", 2016, section 4.
// The emulator runs every access in one order (sequentially consistent); the checks decide what a
// GPU may do otherwise:
//  * Strong accesses: volatile ones (relaxed at .sys scope) and atomics (relaxed at .gpu scope,
//    unless the code asks for another order or scope: atomicAdd_block is .cta, cuda::atomic_ref and
//    inline PTX give theirs). Two strong accesses whose scopes each include the other's thread are
//    morally strong: never a data race. Any other two conflicting accesses of different blocks (one
//    a write) that causality order does not order are a data race: a `race` finding.
//  * Causality order between blocks comes from a release pattern (a .gpu fence, or an atomic with
//    release order; then a strong store) observed by an acquire pattern of one thread (a strong load
//    or read-modify-write that reads that store, or a later one of a chain of read-modify-writes;
//    then a .gpu fence, or the load itself with acquire order). It is cumulative: what the releasing
//    thread knew (its own stores, its block's before a barrier it passed, what it acquired) becomes
//    known. Acquire is per thread; a barrier gives it to the whole block. A view (KView) holds it:
//    a thread's is its block's (Block::know) and what it acquired since (Fiber::know).
//    __threadfence_block(), *_block atomics and barriers order nothing between blocks.
//  * A read-modify-write reads the latest value in coherence order: it never reads a stale value.
//    One that leaves the word unchanged (atomicAdd(p, 0), a failed atomicCAS) is a load: it stores
//    nothing another thread can tell from a load.
//  * Beyond data races, the bug of message passing: a thread that read a store of another block (a
//    flag) and then reads an earlier store of that block (the value) that its view does not hold
//    may get the word's older value on a GPU (strong accesses with no release or acquire): a
//    `race (memory order)` finding naming the three lines.

// The launch's order lock: held by a checked block's strong operation on global memory while the
// operation runs and its record (Pub) is read and written, so that a load observes the record of
// the store it read, not an older one. Never held across a yield or a fatal check.
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}
struct OrderLock {
    std::atomic<bool> *busy = nullptr;
    OrderLock() = default;
    explicit OrderLock(Fiber *f) { take(f); }
    OrderLock(const OrderLock &) = delete;
    OrderLock &operator=(const OrderLock &) = delete;
    ~OrderLock() { release(); }
    // Takes the lock where f's block is checked (else nothing to order).
    void take(Fiber *f) {
        if (!f->blk->checked) return;
        busy = &f->blk->w->launch->order_busy;
        while (busy->exchange(true, std::memory_order_acquire))
            while (busy->load(std::memory_order_relaxed)) cpu_relax();
        tl_order_held = busy;
    }
    void release() {
        if (!busy) return;
        tl_order_held = nullptr;
        busy->store(false, std::memory_order_release);
        busy = nullptr;
    }
};

// An atomic operation as the memory-order checks see it (atomic_order): its memory order (GCC's
// __ATOMIC_*, or -1: a CUDA atomic, relaxed), its scope (__SG_SCOPE_*), whether it loads, whether
// it is a read-modify-write (which reads the latest value), and whether it changed the word (a
// store always does; a read-modify-write that left the word as it was is a load).
struct AtomicOp {
    int mo, scope;
    bool reads, rmw, wrote;
    uint32_t before[4];  // the 4-byte words of [addr & ~3, addr + size) before it ran (Pub::prev)
};
// The 4-byte words an atomic on [addr, addr + size) covers, as they are before it runs (AtomicOp::before).
inline void words_before(AtomicOp &op, const volatile void *addr, unsigned size) {
    uintptr_t lo = reinterpret_cast<uintptr_t>(addr) & ~uintptr_t(3);
    uintptr_t hi = reinterpret_cast<uintptr_t>(addr) + size;
    for (unsigned i = 0; i < 4 && lo + 4 * i < hi; ++i) op.before[i] = *reinterpret_cast<const uint32_t *>(lo + 4 * i);
}

inline const char *race_names[] = {"read-after-write", "write-after-read", "write-after-write"};

// How far an address outside every device allocation may lie from the nearest one and still be
// called an overrun (or underrun) of it: the grader's arena leaves gaps of this much address space
// between allocations (executor.py, GAP_BYTES), so an address in a gap is at most this far from both.
constexpr uintptr_t kNearBytes = uintptr_t(16) << 20;

// Plain mode (a block that is not checked): the cheap range test of every load and store of thread
// f (only shared memory is checked).
inline void plain_at(Fiber *f, uintptr_t addr, unsigned size, int kind, uintptr_t pc) {
    ++f->hdr->vclock;  // virtual clock (sg_abi.h): every access ticks once, here or in check_access
    Block *B = f->blk;
    if (__builtin_expect(B->lv_on, 0)) livelock_note(f, B, addr, size, kind);
    if (addr - reinterpret_cast<uintptr_t>(B->arena) < B->arena_map_len) shared_bounds(f, B, addr, size, kind, pc);
}

inline void plain_access(uintptr_t addr, unsigned size, int kind, uintptr_t pc) {
    if (on_fiber()) plain_at(current_fiber(), addr, size, kind, pc);
}

// The interleaving of a checked launch's random order (sg_launch_config.interleave): before a plain
// load or store of shared or global memory (inside its buffer), a thread of a checked block switches
// to the next thread of its round with this chance out of 65536, drawn from its block's generator
// (seeded by the launch's seed and the block), and the worker may run another resident block next.
// So the load and the store of an unsynchronised read-modify-write (`s[k] += v`) can have another
// thread's in between, and lose its update as on a GPU. A switch is progress (the thread goes on
// with its access): a spin on a plain load is found as a deadlock in the other orders, not here.
inline void interleave(Fiber *f, Block *B, Launch *L) {
    if (!L->interleave || (splitmix(B->irng) & 0xffff) >= L->interleave) return;
    f->state = kYielded;
    B->next.push_back(f->linear);
    B->progress = B->yielded = true;
    B->w->next_in_round(f);
    f->state = kRunnable;
}

void check_access(uintptr_t addr, unsigned size, int kind, bool vol, uintptr_t pc);

// Every plain load and store of a kernel (memory/hooks.cpp): checked where its block is, else the cheap
// range test of plain_access.
inline void memory_access(uintptr_t addr, unsigned size, int kind, uintptr_t pc) {
    if (!on_fiber()) return;
    Fiber *f = current_fiber();
    if (__builtin_expect(f->blk->checked, 0)) check_access(addr, size, kind, false, pc);
    else plain_at(f, addr, size, kind, pc);
}

}  // namespace sg::rt
