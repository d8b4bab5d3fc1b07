// The runtime, checks: the checks of one memory access, volatile loads, atomics' order.
#include "checks/checks.h"
#include "block/rounds.h"
#include "profile/profile.h"

namespace sg::rt {

// The verb of an access in a message: kind 0 read, 1 write, 2 atomic.
static const char *access_verb(int kind) {
    return kind == 0 ? "reads" : kind == 1 ? "writes" : "atomically updates";
}

// An access of `size` bytes (2, 4, 8 or 16) must be aligned to its size: else misaligned.
static void check_alignment(Fiber *f, uintptr_t addr, unsigned size, int kind, uintptr_t pc) {
    if (size <= 1 || (addr & (size - 1)) == 0) return;
    bad_access(f, Kind::misaligned, pc,
               format("misaligned access: thread %s of block %s %s %u bytes at address 0x%lx at {L}, "
                      "which is not a multiple of %u",
                      ids_text(f->hdr->threadIdx).c_str(), ids_text(f->hdr->blockIdx).c_str(), access_verb(kind),
                      size, (unsigned long)addr, size));
}

// An access outside the buffer of allocation al (in a guard zone or past the allocation's end), or
// outside every allocation but near al: named after that buffer (an overrun of in is not called
// an underrun of out).
[[noreturn]] static void outside_buffer(Fiber *f, const Alloc *al, uintptr_t addr, unsigned size, int kind,
                                        uintptr_t pc) {
    uintptr_t ilo, ihi;
    buffer_range(*al, &ilo, &ihi);
    if (al->elem)
        bad_access(f, Kind::out_of_bounds, pc,
                   format("out-of-bounds global memory %s of %s at {L}", access_noun(kind),
                          element_text(al->name, "", ilo, al->count, al->elem, addr).c_str()));
    bool before = addr < ilo;
    bad_access(f, Kind::out_of_bounds, pc,
               format("out-of-bounds global memory access: thread %s of block %s %s %u bytes at {L}, %zu "
                      "bytes %s a %zu-byte device allocation",
                      ids_text(f->hdr->threadIdx).c_str(), ids_text(f->hdr->blockIdx).c_str(), access_verb(kind),
                      size, size_t(before ? ilo - addr : addr + size - ihi),
                      before ? "before the start of" : "past the end of", size_t(al->size)));
}

// A plain store of thread f to [addr, addr + size) of allocation al, or the hook of a volatile one:
// its record is written here, before its value (its hook runs first); Worker::vstore says so until
// the thread's next step. Under the order lock, so that no older value is in the word while a load
// holds it there (give_stale): this store's value would be lost when it is put back.
static void publish_store(Launch *L, Fiber *f, Alloc *al, uintptr_t addr, unsigned size, bool vol, uintptr_t pc) {
    OrderLock lock;
    if (vol) {
        lock.take(f);
        f->blk->w->vstore.store(&al->pub[(addr - al->base) >> 2], std::memory_order_relaxed);
        std::atomic_thread_fence(std::memory_order_seq_cst);  // before the record's writes
    }
    for (uintptr_t a = addr; a < addr + size; a += 4)
        publish(L, f, al->pub[(a - al->base) >> 2], vol, false, pc, nullptr,
                *reinterpret_cast<const uint32_t *>(a & ~uintptr_t(3)));  // the value before this store
}

// A checked access of allocation al: inside its buffer, then the memory order between blocks
// (observe what a plain load reads, publish what a store writes) and the races.
static void check_global(Fiber *f, Alloc *al, uintptr_t addr, unsigned size, int kind, bool vol, uintptr_t pc) {
    Block *B = f->blk;
    Launch *L = B->w->launch;
    uintptr_t ilo, ihi;
    buffer_range(*al, &ilo, &ihi);
    if (addr < ilo || addr + size > ihi) outside_buffer(f, al, addr, size, kind, pc);
    if (kind != 2 && !vol) interleave(f, B, L);
    if (kind == 2) return;  // an atomic: its order and races after it ran (atomic_order)
    bool reported = false;
    if (al->pub) {
        Pub &w = al->pub[(addr - al->base) >> 2];
        Pub seen;
        bool other = w.inst && w.inst >= L->inst_base && w.inst != B->inst;  // else observe has nothing to do
        if (kind == 0 && !vol && other && record_seen(L, f, &w, &seen))
            reported = observe(L, f, seen, pc, false, &w);  // a volatile load: when it loads (volatile_loaded)
        if (kind == 1) publish_store(L, f, al, addr, size, vol, pc);
    }
    if (al->shadow) track(L, f, al->shadow, addr - al->base, size, kind, vol, pc, true, false, reported, al);
}

// A checked access in no device allocation and not in the block's shared memory: allowed in the
// module's __device__ and __constant__ variables and on a thread's stack of this worker; else
// out-of-bounds (named after a buffer near it, if one is).
static void check_unallocated(Fiber *f, uintptr_t addr, unsigned size, int kind, uintptr_t pc) {
    Block *B = f->blk;
    if (in_module(addr)) return;  // __device__ and __constant__ variables
    for (auto &s : B->w->slots)
        if (s && s->owns_stack(addr)) return;  // another thread's local variable
    if (const Alloc *near = nearest_alloc(B->w->launch, addr, size)) outside_buffer(f, near, addr, size, kind, pc);
    bad_access(f, Kind::out_of_bounds, pc,
               format("out-of-bounds access: thread %s of block %s %s %u bytes at address 0x%lx at {L}, which is in "
                      "no device allocation, not in the block's shared memory and not a local variable%s",
                      ids_text(f->hdr->threadIdx).c_str(), ids_text(f->hdr->blockIdx).c_str(), access_verb(kind), size,
                      (unsigned long)addr, addr < 65536 ? " (a null or small pointer)" : ""));
}

// kind: 0 read, 1 write, 2 atomic
void check_access(uintptr_t addr, unsigned size, int kind, bool vol, uintptr_t pc) {
    Fiber *f = current_fiber();
    ++f->hdr->vclock;  // virtual clock (sg_abi.h): as plain_at does, before any early return
    f->blk->w->vstore.store(nullptr, std::memory_order_relaxed);  // its last volatile store is done
    f->blk->w->vload.store(nullptr, std::memory_order_relaxed);   // and its last volatile load
    if (f->vol_addr) settle_volatile(f);
    if (((addr ^ reinterpret_cast<uintptr_t>(f->hdr)) & ~(kStack - 1)) == 0) return;  // its own stack
    Block *B = f->blk;
    if (B->checks_left && --B->checks_left == 0) B->checked = false;  // its sampled share checked: plain from now on
    if (__builtin_expect(B->lv_on, 0)) livelock_note(f, B, addr, size, kind);
    Launch *L = B->w->launch;
    check_alignment(f, addr, size, kind, pc);
    uintptr_t a0 = reinterpret_cast<uintptr_t>(B->arena);
    if (addr - a0 < B->arena_map_len) {
        shared_bounds(f, B, addr, size, kind, pc);
        if (kind != 2 && !vol) interleave(f, B, L);
        track(L, f, B->sh.data(), addr - a0, size, kind, vol, pc, false);
        return;
    }
    if (Alloc *al = find_alloc(L, addr)) check_global(f, al, addr, size, kind, vol, pc);
    else check_unallocated(f, addr, size, kind, pc);
}

// A volatile load of `addr` (checks on), just before it loads: the record of the word now is of the
// store it will read or an earlier one. The memory-order check (observe) and what the thread records
// as read take it (an earlier store there can only leave a finding out); what the store released
// is taken at the thread's next checked step (settle_volatile), when the record of any store the
// load can have read is written (a strong store's record is written before its value, or with it
// under the order lock), so that a release is never missed.
void volatile_loaded(uintptr_t addr, unsigned size, uintptr_t pc) {
    Fiber *f = current_fiber();
    Block *B = f->blk;
    Launch *L = B->w->launch;
    uintptr_t shared = addr - reinterpret_cast<uintptr_t>(B->arena);
    if (shared < B->arena_map_len) {
        // A flag of shared memory: the last store to the word, if another thread's strong store after
        // its fence (track: kAccReleased), passes that thread's release on once this one fences.
        size_t gi = shared >> 2;
        if (gi < B->sh.size()) {
            const Acc &w = B->sh[gi].w;
            if (w.inst == B->inst && (w.tm & kAccReleased) && thr_of(w) != f->linear && B->sh_rel[gi])
                kmerge(f->pend, KEnt{B->inst, 0, B->sh_rel[gi], uint16_t(thr_of(w))});
        }
        return;
    }
    Alloc *al = find_alloc(L, addr);
    if (!al || !al->pub) return;
    OrderLock lock(f);
    const Pub *at = &al->pub[(addr - al->base) >> 2];
    Pub w;
    if (record_seen(L, f, at, &w)) {
        Obs chain;
        bool chained = false;
        observe(L, f, w, pc, false, at, &chain, &chained);
        if (chained) {
            if (give_stale(L, f, al, addr, size, w, at, chain, pc, true, lock)) return;  // the last thing before the load
            remember_read(L, f, w, pc);
        }
        note_dep(L, f, w, at);
    }
    B->w->vload.store(at, std::memory_order_relaxed);
    f->vol_addr = addr;
}

// Thread f's last volatile load of global memory (volatile_loaded), settled: what the store it read
// released is f's once it fences (a volatile load is relaxed). The record may be of a later store
// than the one read: that can only give f more.
void settle_volatile(Fiber *f) {
    uintptr_t addr = f->vol_addr;
    f->vol_addr = 0;
    Launch *L = f->blk->w->launch;
    Alloc *al = find_alloc(L, addr);
    if (!al || !al->pub) return;
    OrderLock lock(f);
    take(L, f, al->pub[(addr - al->base) >> 2], false, true);
}

// Whether an atomic of memory order mo acquires, or releases (at its scope).
static bool order_acquires(int mo) { return mo == __ATOMIC_CONSUME || mo == __ATOMIC_ACQUIRE || mo >= __ATOMIC_ACQ_REL; }
static bool order_releases(int mo) { return mo == __ATOMIC_RELEASE || mo >= __ATOMIC_ACQ_REL; }

// What atomic `op` of thread f read of word w (the record of its first word): observed (the memory
// order check; a load may be given an older value, then it read nothing of w), then acquired where
// its order says so (`cta`: of .cta scope, nothing of other blocks).
static void atomic_observes(Fiber *f, Alloc *al, uintptr_t addr, unsigned size, const AtomicOp &op, uintptr_t pc,
                            bool cta) {
    Launch *L = f->blk->w->launch;
    Pub &w = al->pub[(addr - al->base) >> 2];
    Obs chain;
    bool chained = false;
    observe(L, f, w, pc, op.rmw, &w, op.rmw ? nullptr : &chain, &chained);
    if (chained) {
        OrderLock none;
        if (give_stale(L, f, al, addr, size, w, &w, chain, pc, false, none)) return;
        remember_read(L, f, w, pc);
    }
    if (!cta) note_dep(L, f, w, &w);
    take(L, f, w, order_acquires(op.mo), !cta);
}

// What atomic `op` of thread f stored in [addr, addr + size): released where its order says so
// (.cta scope: the thread's release time only), then published word by word (`first`: the record of
// the first word before the atomic ran, what a read-modify-write read).
static void atomic_publishes(Fiber *f, Alloc *al, uintptr_t addr, unsigned size, const AtomicOp &op, uintptr_t pc,
                             bool cta, const Pub &first) {
    Launch *L = f->blk->w->launch;
    if (order_releases(op.mo)) {
        if (!cta) release_point(L, f);
        else f->lrel = L->clock.fetch_add(1) + 1;
    }
    for (uintptr_t a = addr; a < addr + size; a += 4) {
        Pub &wa = al->pub[(a - al->base) >> 2];
        Pub read = a == addr ? first : wa;
        publish(L, f, wa, true, cta, pc, op.rmw ? &read : nullptr, op.before[((a - addr) >> 2) & 3]);
    }
}

// An atomic `op` of thread f on [addr, addr + size) has just run (checked, its bounds checked before
// it, the order lock held). Global memory: observe and acquire what it read, release and publish
// what it stored, and its races.
void atomic_order(Fiber *f, uintptr_t addr, unsigned size, const AtomicOp &op, uintptr_t pc) {
    Block *B = f->blk;
    Launch *L = B->w->launch;
    if (addr - reinterpret_cast<uintptr_t>(B->arena) < B->arena_map_len) return;  // shared memory: check_access
    Alloc *al = find_alloc(L, addr);
    if (!al) return;
    bool cta = op.scope > __SG_SCOPE_DEVICE;
    if (al->pub) {
        Pub before = al->pub[(addr - al->base) >> 2];
        if (op.reads) atomic_observes(f, al, addr, size, op, pc, cta);
        if (op.wrote) atomic_publishes(f, al, addr, size, op, pc, cta, before);
    }
    if (al->shadow) {
        if (op.reads) track(L, f, al->shadow, addr - al->base, size, 0, true, pc, true, cta, false, al);
        if (op.wrote) track(L, f, al->shadow, addr - al->base, size, 1, true, pc, true, cta, false, al);
    }
}

Worker *current_worker() { return current_fiber()->blk->w; }

}  // namespace sg::rt
