// The runtime, checks: the PTX memory model between blocks (views, releases, acquires).
#include "checks/checks.h"

namespace sg::rt {

// The view snapshotted with id `id` (snapshot), or nullptr.
const KView *snap_view(Launch *L, uint32_t id) {
    if (!id) return nullptr;
    uint32_t i = id - 1;
    const KView *chunk = L->snaps[i / kSnapChunk].get();
    return chunk ? &chunk[i % kSnapChunk] : nullptr;
}

// Views a and b merged, kept for the rest of the launch: its id, or 0 where it is empty (or the
// launch has kept kSnapChunk * kSnapChunks of them; what a later one would hold is then lost, which
// can only report a race that a view would have ordered). `last`: a thread's previous snapshot,
// returned again where it holds the same.
uint32_t snapshot(Launch *L, const KView &a, const KView &b, uint32_t last) {
    if (a.empty() && b.empty()) return 0;
    KView v = a;
    kmerge(v, b);
    if (const KView *prev = snap_view(L, last))
        if (*prev == v) return last;
    std::lock_guard<std::mutex> lock(L->snap_mu);
    if (L->nsnaps >= kSnapChunk * kSnapChunks) return 0;
    uint32_t i = L->nsnaps;
    if (!L->snaps[i / kSnapChunk]) L->snaps[i / kSnapChunk].reset(new KView[kSnapChunk]);
    L->snaps[i / kSnapChunk][i % kSnapChunk] = std::move(v);
    return ++L->nsnaps;
}

// A release of thread f at .gpu scope (a fence; an atomic with release order, before its store):
// its stores so far, its block's before the block's last barrier, and its view, are what a thread
// of another block that observes its next strong store and acquires comes to know.
void release_point(Launch *L, Fiber *f) {
    Block *B = f->blk;
    f->rel_time = f->lrel = L->clock.fetch_add(1) + 1;
    f->rel_bar = B->last_bar_time;
    f->rel_snap = snapshot(L, B->know, f->know, f->rel_snap);
}

// What observing store w gives (the storing thread's release and the view it had then) added to v.
void observed(Launch *L, const Pub &w, KView &v) {
    if (w.rel) kmerge(v, KEnt{w.inst, w.rel_bar, w.rel, w.thr});
    if (const KView *s = snap_view(L, w.snap)) kmerge(v, *s);
}

// A strong load of thread f that read store w: what the store released is f's now (`acq`: the load
// has acquire order) or once f fences (pending). From another block, a store of .gpu or .sys scope
// read by a load of such a scope (`wide`; the two are then morally strong) gives what its thread
// released at .gpu scope; from f's own block, any strong store gives its thread's stores before its
// last fence of any scope (fence.cta suffices within a block).
void take(Launch *L, Fiber *f, const Pub &w, bool acq, bool wide) {
    if (!w.inst || w.inst < L->inst_base) return;
    KView &into = acq ? f->know : f->pend;
    if (w.inst == f->blk->inst) {
        if (w.lrel && w.thr != f->linear) kmerge(into, KEnt{w.inst, 0, w.lrel, w.thr});
        return;
    }
    if (!wide || w.cta) return;
    if (w.strong) kmerge(into, KEnt{w.inst, 0, 0, 0, w.time, w.thr});  // the store itself, observed
    observed(L, w, into);
}

// Thread f's strong load (of .gpu or .sys scope) read store w: its next stores record w as what their
// thread had observed (Pub::dep), for the write-to-read chain of observe.
void note_dep(Launch *L, Fiber *f, const Pub &w, const Pub *at) {
    if (w.inst && w.inst >= L->inst_base && w.inst != f->blk->inst && w.strong && !w.cta)
        f->dep = at, f->dep_time = w.time;
}

// Word `at`'s record as a load sees it: copied, then whether a volatile store to it is still between
// its hook and its store on another worker (word_in_flight, read after the copy: the store's thread
// marks it before it writes the record). False where it is.
bool record_seen(Launch *L, const Fiber *f, const Pub *at, Pub *copy) {
    *copy = *at;
    std::atomic_thread_fence(std::memory_order_seq_cst);  // the copy before the look at Worker::vstore
    return !word_in_flight(L, f, at, false);
}

// A memory fence of thread f (__threadfence(): fence.sc.gpu; cuda::atomic_thread_fence; PTX fence
// and membar) at `scope` (__SG_SCOPE_*), with checks on: an acquire (what f's strong loads observed
// becomes f's: of its own block at any scope, of other blocks at .gpu or .sys scope only) and a
// release (release_point at .gpu or .sys scope; of its own block's threads only at .cta).
void fence(Fiber *f, int scope) {
    f->blk->w->vstore.store(nullptr, std::memory_order_relaxed);  // its last volatile store is done
    f->blk->w->vload.store(nullptr, std::memory_order_relaxed);   // and its last volatile load
    if (f->vol_addr) settle_volatile(f);
    Launch *L = f->blk->w->launch;
    bool wide = scope <= __SG_SCOPE_DEVICE;
    if (!f->pend.empty()) {
        size_t keep = 0;
        for (const KEnt &e : f->pend) {
            if (wide || e.inst == f->blk->inst) kmerge(f->know, e);
            else f->pend[keep++] = e;
        }
        f->pend.resize(keep);
    }
    if (wide) release_point(L, f);
    else f->lrel = L->clock.fetch_add(1) + 1;
}

// Whether thread f's view holds thread `thr` of block `inst`'s store (or load) at launch time `time`.
bool knows(const Fiber *f, uint32_t inst, unsigned thr, uint32_t time) {
    const KEnt *e = kfind(f->know, inst);
    if (e && kcovers(*e, thr, time)) return true;
    e = kfind(f->blk->know, inst);
    return e && kcovers(*e, thr, time);
}

// Whether `a` (another thread's access) happens before the current access of f: in its block, by
// program order, a barrier since, a warp rendezvous both took part in, or a fence and a strong flag
// (message passing between warps, in global or shared memory: a fence of any scope suffices within
// the block, as fence.cta's scope holds every thread of the CTA, and a fence then a strong store is
// a release pattern, a strong load then a fence an acquire pattern: the PTX ISA, "Memory
// Consistency Model", release and acquire patterns and causality order; herdtools7
// catalogue/ptx/tests/mp+membar.ctas.litmus); between blocks (global memory), by causality order
// (f's view). Times are the launch clock's, in shared memory too.
bool ordered(Launch *L, Block *B, Fiber *f, const Acc &a, bool global) {
    (void)L;
    if (a.inst == B->inst) {
        if (thr_of(a) == f->linear) return true;
        if (B->last_bar_time > a.time) return true;
        if (thr_of(a) / 32 == f->linear / 32 && int16_t(uint16_t(f->wserial - a.rv)) > 0) return true;
        return knows(f, a.inst, thr_of(a), a.time);  // a fence and a flag within the block
    }
    if (!global) return true;
    return knows(f, a.inst, thr_of(a), a.time);
}

}  // namespace sg::rt
