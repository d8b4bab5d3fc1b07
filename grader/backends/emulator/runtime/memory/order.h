// The runtime, memory level: what a thread knows of other blocks' stores (views, the PTX memory
// model's causality order) and the record of a store to global memory (Pub).
#pragma once

#include "util.h"

namespace sg::rt {

// Causality between blocks (memory/access.h, "the PTX memory model"): what a thread knows of another
// block's stores. One entry: every store of block `inst` made before that block's barrier at launch
// time `bar`, and every store of its thread `thr` made before time `rel`, is visible (in causality
// order before what the knowing thread does next). A view is a list of them sorted by `inst`.
// Also, exactly, the strong store of thread `sthr` at time `seen` (the latest such store of the block
// that a strong load observed: observation order is part of causality order, the PTX ISA, "Memory
// Consistency Model"), without that thread's earlier stores.
struct KEnt {
    uint32_t inst, bar, rel;
    uint16_t thr;
    uint32_t seen = 0;
    uint16_t sthr = 0;
};
using KView = std::vector<KEnt>;

// The entry of block `inst` in view v, or nullptr.
inline const KEnt *kfind(const KView &v, uint32_t inst) {
    auto it = std::lower_bound(v.begin(), v.end(), inst, [](const KEnt &e, uint32_t i) { return e.inst < i; });
    return it != v.end() && it->inst == inst ? &*it : nullptr;
}

// Whether entry e makes thread `thr`'s store at launch time `time` of e's block visible.
inline bool kcovers(const KEnt &e, unsigned thr, uint32_t time) {
    return e.bar > time || (e.thr == thr && e.rel > time) || (time && e.seen == time && e.sthr == thr);
}

// Adds what entry e says to view v (the later barrier; the later release, of one thread only: a
// view keeps one releasing thread a block, the latest, which can only leave out what another
// thread of that block released before its last barrier). Whether v changed.
inline bool kmerge(KView &v, const KEnt &e) {
    auto it = std::lower_bound(v.begin(), v.end(), e.inst, [](const KEnt &x, uint32_t i) { return x.inst < i; });
    if (it == v.end() || it->inst != e.inst) {
        v.insert(it, e);
        return true;
    }
    bool changed = false;
    if (e.bar > it->bar) it->bar = e.bar, changed = true;
    if (e.rel > it->rel) it->rel = e.rel, it->thr = e.thr, changed = true;
    if (e.seen > it->seen) it->seen = e.seen, it->sthr = e.sthr, changed = true;
    return changed;
}
inline bool operator==(const KEnt &a, const KEnt &b) {
    return a.inst == b.inst && a.bar == b.bar && a.rel == b.rel && a.thr == b.thr && a.seen == b.seen && a.sthr == b.sthr;
}
// Whether this OS thread holds its launch's order lock (memory/access.h, OrderLock): a fault while it
// does releases it (grid/faults.h).
inline thread_local std::atomic<bool> *tl_order_held = nullptr;

// A checked volatile load given an older value of its word (checks/races.cpp, give_stale): the hook
// wrote that value into memory just before the load, under the order lock; the bytes the word
// holds now go back, and the lock is released, when the thread next enters the runtime
// (current_fiber, fiber_main, on_fault), before anything else runs on this OS thread.
struct StaleHold {
    uintptr_t addr;
    unsigned size;
    unsigned char now[16];
};
inline thread_local StaleHold tl_stale{0, 0, {}};
inline void put_back_stale() {
    std::memcpy(reinterpret_cast<void *>(tl_stale.addr), tl_stale.now, tl_stale.size);
    tl_stale.addr = 0;
    if (tl_order_held) {
        tl_order_held->store(false, std::memory_order_release);
        tl_order_held = nullptr;
    }
}
inline bool kmerge(KView &v, const KView &from) {
    bool changed = false;
    for (const KEnt &e : from) changed |= kmerge(v, e);
    return changed;
}

// The last store to a 4-byte word of global memory (checks/races.cpp, publish): which block and thread
// stored it, when (the launch clock; a strong store takes a tick of its own, so that a flag stored
// after a value is later than the value), where; whether it was strong (volatile or atomic) and
// of .cta scope only; and what a thread that observes it (reads it, then acquires) comes to know:
// the storing thread's last .gpu release (time `rel`, its block's last barrier `rel_bar` before it)
// and the view it had then, with what the read-modify-writes it followed carried (`snap`, 0: none).
// `dep`, `dep_time`: the strong store of another block that the storing thread last observed
// before this store (its record, compared by address only, and its time), for write-to-read
// causality chains (WRC: a thread reads a store, then stores what a third one reads). `prev`: the
// word as it was just before this store, the older value a GPU may still give a load that the
// model does not order after it (checks/races.cpp, give_stale).
struct Pub {
    uint32_t inst, time, pc, rel, rel_bar, snap, lrel;  // lrel: the storing thread's last fence of any scope (for its own block)
    uint16_t thr;
    uint8_t strong, cta;
    uint32_t dep_time;
    const Pub *dep;
    uint32_t prev;
};

struct Obs {
    Pub p;
    uint32_t seen, rpc;
};

}  // namespace sg::rt
