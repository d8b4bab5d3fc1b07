// The runtime, checks: races, the order of observed stores, uninitialised shared memory.
#include "checks/checks.h"
#include "block/rounds.h"

namespace sg::rt {

// A race of thread f's access (at pc) with the recorded access `a`, which the emulator ran first, on
// byte `off` of the block's shared memory (al null) or of allocation al.
void report_race(Launch *L, Fiber *f, const Acc &a, int which, uintptr_t pc, bool global, bool vol, const Alloc *al,
                 size_t off) {
    Finding fd = make_finding(f, Kind::race);
    copy_str(fd.access, sizeof fd.access, race_names[which]);
    copy_str(fd.where, sizeof fd.where, element_at(f->blk, al, off));
    loc_pc(fd.loc, sizeof fd.loc, pc);
    if (a.pc) std::snprintf(fd.other, sizeof fd.other, "@%x", a.pc);
    fd.has_other = 1;
    uint64_t ob = uint64_t(a.inst - L->inst_base);
    fd.oblock = block_ids(L, ob);
    fd.othread = thread_ids(L, thr_of(a));
    bool same_block = a.inst == f->blk->inst;
    const char *verb = which == 0 ? "reads" : "writes";
    const char *overb = which == 1 ? "read" : "wrote";
    const KEnt *e = global && !same_block ? kfind(f->know, a.inst) : nullptr;
    if (global && !same_block && !e) e = kfind(f->blk->know, a.inst);
    std::string missing =
        same_block ? std::string("__syncthreads() (or __syncwarp() within a warp)")
        // This thread knows what the other block released, but that release did not cover this
        // access of one of its threads: that thread's write was not done before the release.
        : e ? format("synchronisation between the blocks: block %s published (a __threadfence() and a flag) before "
                     "its thread %s %s this, so the flag does not cover it: put a __syncthreads() before the thread "
                     "that publishes, so that every thread of the block is done first",
                     ids_text(fd.oblock).c_str(), ids_text(fd.othread).c_str(), overb)
        : (a.tm & kAccCta) ? std::string("ordering between the blocks: an atomic of block scope (*_block, "
                                         "thread_scope_block, .cta) orders nothing for another block, and two "
                                         "blocks' *_block atomics on one word are a data race (the PTX memory "
                                         "model, morally strong): use the atomic of device scope")
        : (a.tm & kAccStrong) || vol
            ? std::string("synchronisation between the blocks: one of the two is a plain (weak) access and the other "
                          "atomic or volatile, which the PTX memory model calls a data race (they are not morally "
                          "strong): make both atomic or volatile, or order them (a __threadfence() and a flag)")
            : std::string("synchronisation between the blocks (a __threadfence() and a flag, or separate kernels)");
    std::snprintf(fd.msg, sizeof fd.msg,
                  "race (%s) on %s memory: thread %s of block %s %s at {L} what thread %s of block %s %s at {O}, "
                  "with no %s between them%s",
                  race_names[which], global ? "global" : "shared", ids_text(f->hdr->threadIdx).c_str(),
                  ids_text(f->hdr->blockIdx).c_str(), verb, ids_text(fd.othread).c_str(), ids_text(fd.oblock).c_str(),
                  overb, missing.c_str(),
                  vol && !global ? " (volatile does not order threads: since Volta, warp-synchronous code needs "
                                   "__syncwarp())"
                                 : "");
    add_finding(f->blk->w, fd);
}

// A store of thread f to global word `w` (of an allocation's Pub table): who, when, strong or not,
// its scope, and what observing it gives: f's last .gpu release, and for a read-modify-write what
// the store it read gave (`read`: observation runs through chains of read-modify-writes).
void publish(Launch *L, Fiber *f, Pub &w, bool strong, bool cta, uintptr_t pc, const Pub *read, uint32_t prev) {
    Block *B = f->blk;
    uint32_t t = strong ? L->clock.fetch_add(1) + 1 : L->clock.load(std::memory_order_relaxed);
    uint32_t pcoff = pc && g_module_base ? uint32_t(pc - g_module_base - 1) : 0;
    uint32_t snap = f->rel_snap;
    if (read && read->inst >= L->inst_base && read->inst && !read->cta && (read->rel || read->snap)) {
        KView v;
        observed(L, *read, v);
        if (const KView *own = snap_view(L, snap)) kmerge(v, *own);
        snap = snapshot(L, v, KView(), 0);
    }
    w = Pub{B->inst, t, pcoff, cta ? 0 : f->rel_time, f->rel_bar, cta ? 0 : snap, f->lrel, uint16_t(f->linear),
            uint8_t(strong), uint8_t(cta), f->dep_time, f->dep, prev};
}

void report_order(Launch *L, Fiber *f, const Pub &p, const Obs &o, bool writer_side, uintptr_t pc) {
    Finding fd = make_finding(f, Kind::race);
    loc_pc(fd.loc, sizeof fd.loc, pc);
    std::snprintf(fd.other, sizeof fd.other, "@%x", p.pc);
    fd.has_other = 1;
    fd.oblock = block_ids(L, uint64_t(p.inst - L->inst_base));
    fd.othread = thread_ids(L, p.thr);
    std::string who = ids_text(fd.oblock);
    std::string head = format("race (memory order) between blocks: thread %s of block %s reads at {L} what block %s "
                              "stored at {O}, after reading at {@%x} what that block stored later, at {@%x}: ",
                              ids_text(f->hdr->threadIdx).c_str(), ids_text(f->hdr->blockIdx).c_str(), who.c_str(),
                              o.rpc, o.p.pc);
    std::string tail =
        writer_side && p.thr != o.p.thr && o.p.rel && p.time >= o.p.rel_bar
        ? format("thread %s stored the value and thread %s the later one with no __syncthreads() between them: put "
                 "one after the value's store, and a __threadfence() after it in the thread that stores the later "
                 "one, or a GPU can make the later store visible first and this read gets the old value (the PTX "
                 "memory model; Merrill & Garland 2016, section 4)",
                 ids_text(thread_ids(L, p.thr)).c_str(), ids_text(thread_ids(L, o.p.thr)).c_str())
        : writer_side
        ? format("missing __threadfence() between {O} and {@%x} (__threadfence_block() orders a block's own threads "
                 "only), so a GPU can make the later store visible first and this read gets the old value (the PTX "
                 "memory model; Merrill & Garland 2016, section 4)", o.p.pc)
        : format("missing __threadfence() between {@%x} and {L} (in this thread: acquiring is per thread, and a "
                 "__syncthreads() after another thread's fence does not do it): without it this load can be served "
                 "before the one at {@%x} and get the old value (the PTX memory model; Merrill & Garland 2016, "
                 "section 4)",
                 o.rpc, o.rpc);
    std::snprintf(fd.msg, sizeof fd.msg, "%s%s", head.c_str(), tail.c_str());
    add_finding(f->blk->w, fd);
}

// The write-to-read chain's finding (observe, give_stale): f read at o.rpc a store of block o.p.inst
// whose thread had read p's store first; now it reads p's word at pc and may get the older value.
// A `stale-read`, a warning (grader/core/kinds.py): a stale value is a bug only where it changes
// the output (a poll that gets it just polls again), so the case fails only where the run that
// was given the older value (`given`) ends with a wrong output (grader/grading/case/run.py).
void report_chain(Launch *L, Fiber *f, const Pub &p, const Obs &o, uintptr_t pc, bool given) {
    Finding fd = make_finding(f, Kind::stale_read);
    loc_pc(fd.loc, sizeof fd.loc, pc);
    std::snprintf(fd.other, sizeof fd.other, "@%x", p.pc);
    fd.has_other = 1;
    fd.oblock = block_ids(L, uint64_t(p.inst - L->inst_base));
    fd.othread = thread_ids(L, p.thr);
    std::string mid = ids_text(block_ids(L, uint64_t(o.p.inst - L->inst_base)));
    std::snprintf(fd.msg, sizeof fd.msg,
                  "thread %s of block %s reads at {L} what block %s stored at {O}, after reading at {@%x} what "
                  "block %s stored at {@%x} once it had read that store; with no __threadfence() in block %s "
                  "between its read and its store (and in this thread after its read at {@%x}), a GPU may give "
                  "this read the older value (write-to-read causality: the PTX memory model; Lustig et al., "
                  "ASPLOS 2019, section 3.4.4)%s",
                  ids_text(f->hdr->threadIdx).c_str(), ids_text(f->hdr->blockIdx).c_str(),
                  ids_text(fd.oblock).c_str(), o.rpc, mid.c_str(), o.p.pc, mid.c_str(), o.rpc,
                  given ? ": the emulator gave it the older value" : "");
    add_finding(f->blk->w, fd);
}

// Whether another worker's running thread is between the hook and the access of a volatile store of
// word p (Worker::vstore), or with `loads` of a volatile load of it too (Worker::vload). A store
// there: a load now may read the value before it, so the memory-order check leaves the load out (it
// may only miss a finding) rather than take it for a read of that store. Either: no older value may
// go into the word now (give_stale).
bool word_in_flight(Launch *L, const Fiber *f, const Pub *p, bool loads) {
    for (unsigned i = 0; i < L->nworkers; ++i) {
        Worker *o = L->workers[i];
        if (o == f->blk->w) continue;
        for (const Pub *q : {o->vstore.load(std::memory_order_relaxed),
                             loads ? o->vload.load(std::memory_order_relaxed) : nullptr})
            if (q && (q == p || q + 1 == p)) return true;
    }
    return false;
}

// Thread f has read global word `w` (at pc), a store of another block: remembered as read (the
// latest store of each block, kObs blocks), for observe's checks of its later reads.
void remember_read(Launch *L, Fiber *f, const Pub &w, uintptr_t pc) {
    uint32_t pcoff = pc && g_module_base ? uint32_t(pc - g_module_base - 1) : 0;
    Obs now{w, L->clock.load(std::memory_order_relaxed), pcoff};
    Obs *slot = nullptr;
    for (unsigned i = 0; i < f->nobs && !slot; ++i)
        if (f->obs[i].p.inst == w.inst) slot = &f->obs[i];
    if (slot) {
        if (w.time > slot->p.time) *slot = now;
    } else if (f->nobs < kObs) {
        f->obs[f->nobs++] = now;
    } else {
        slot = &f->obs[0];
        for (unsigned i = 1; i < kObs; ++i)
            if (f->obs[i].seen < slot->seen) slot = &f->obs[i];
        *slot = now;
    }
}

// Thread f reads (at pc) global word `w`: the message-passing check against what it read of the
// same block before (not for a read-modify-write, which reads the latest value), then `w`
// remembered as read (remember_read). Whether it reported. A strong load passes `chain`: where the
// write-to-read chain applies, it gets the store read before (*chain) and reports nothing, and `w`
// is not remembered (the caller decides: give_stale); a plain load reports it as it is.
bool observe(Launch *L, Fiber *f, const Pub &w, uintptr_t pc, bool rmw, const Pub *at,
             Obs *chain, bool *chained) {
    if (!at) at = &w;  // the word's record (w may be a copy of it)
    Block *B = f->blk;
    if (!w.inst || w.inst < L->inst_base || w.inst == B->inst) return false;  // not stored by another block now
    bool reported = false;
    for (unsigned i = 0; i < f->nobs && !rmw; ++i) {
        const Obs &o = f->obs[i];
        if (o.p.inst != w.inst || o.p.time <= w.time) continue;  // not a later store of that block
        if (!knows(f, w.inst, w.thr, w.time)) {
            KView v;
            if (!o.p.cta) observed(L, o.p, v);
            const KEnt *e = kfind(v, w.inst);
            report_order(L, f, w, o, !(e && kcovers(*e, w.thr, w.time)), pc);
            reported = true;
        }
        break;
    }
    // A store it read (of a third block) whose thread had observed this word's store, or a later one,
    // before it stored: this read may still get the older value unless that thread released after
    // its read and this one acquired (write-to-read causality; Lustig et al. 2019, section 3.4.4).
    for (unsigned i = 0; i < f->nobs && !rmw && !reported; ++i) {
        const Obs &o = f->obs[i];
        if (o.p.dep != at || o.p.dep_time < w.time || o.p.inst == w.inst || knows(f, w.inst, w.thr, w.time)) continue;
        if (chain) {
            *chain = o, *chained = true;
            return false;
        }
        report_chain(L, f, w, o, pc, false);
        reported = true;
    }
    remember_read(L, f, w, pc);
    return reported;
}

// The write-to-read chain (observe) applies to thread f's strong load of [addr, addr + size), whose
// word's record is `at` (its copy `w`), after it read the store `chain`: the PTX memory model lets
// a GPU give this load the value the word had before w's store. Where the emulator can, it does:
// the older value (Pub::prev) of each word goes into memory just before a volatile load (`vol`: the
// load follows this hook; the order lock stays held and the bytes go back at the thread's next entry
// into the runtime, StaleHold), or is what an atomic load returns (Fiber::stale_val); what a
// thread does with it then decides: a poll reads again (and then gets memory, once per store:
// Fiber::stale_at), a value used changes the output. It can where every block of the launch is
// checked (a block without the order lock could read the word meanwhile), the load is of whole
// records of one store (each word's record from the same thread and site as w's), no other thread
// is between the hook and the access of a volatile load or store of those words, and f has read no
// store of w's block as late as w (coherence: it cannot read an older value after a newer one).
// Reports the `stale-read` finding (report_chain) either way. Returns whether the value was given
// (then the caller records nothing of w: f did not read it).
bool give_stale(Launch *L, Fiber *f, const Alloc *al, uintptr_t addr, unsigned size, const Pub &w, const Pub *at,
                const Obs &chain, uintptr_t pc, bool vol, OrderLock &lock) {
    if (f->stale_at == at && f->stale_time == w.time) return false;  // given once: this load reads memory
    uintptr_t lo = addr & ~uintptr_t(3);
    unsigned words = unsigned((addr + size - lo + 3) / 4);
    bool can = (!vol || L->sample_mode == 0) && size <= 8 && words <= 2 && lo + 4 * words <= al->base + al->size;
    uint32_t prev[2] = {0, 0};
    for (unsigned i = 0; can && i < words; ++i) {
        const Pub &p = al->pub[(lo + 4 * i - al->base) >> 2];
        can = p.inst == w.inst && p.thr == w.thr && p.pc == w.pc && p.strong && !(vol && word_in_flight(L, f, &p, true));
        prev[i] = p.prev;
    }
    for (unsigned i = 0; can && i < f->nobs; ++i)
        can = !(f->obs[i].p.inst == w.inst && f->obs[i].p.time >= w.time);
    report_chain(L, f, w, chain, pc, can);
    if (!can) return false;
    f->stale_at = at, f->stale_time = w.time;
    const unsigned char *older = reinterpret_cast<const unsigned char *>(prev) + (addr - lo);
    if (vol) {
        tl_stale.size = size;
        std::memcpy(tl_stale.now, reinterpret_cast<const void *>(addr), size);
        std::memcpy(reinterpret_cast<void *>(addr), older, size);
        std::atomic_thread_fence(std::memory_order_seq_cst);
        tl_stale.addr = addr;
        lock.busy = nullptr;  // held until put_back_stale (tl_order_held)
    } else {
        std::memcpy(f->stale_val, older, size);
        f->stale_ready = true;
    }
    return true;
}

// A read (kind 0) or atomic update (kind 2) of arena byte `off`, which no thread of the block has
// written: a warning, recorded and never fatal (the launch goes on; the grader decides by the
// output, under two fills). Named by its array and element; one finding per code address.
void uninit_read(Fiber *f, uintptr_t pc, size_t off, int kind) {
    Block *B = f->blk;
    for (unsigned i = 0; i < B->uninit_n; ++i)
        if (B->uninit_pcs[i] == pc) return;  // add_finding keeps a block's first one anyway
    if (B->uninit_n < kUninitPcs) B->uninit_pcs[B->uninit_n++] = pc;
    std::string what = element_at(B, nullptr, off);
    Finding fd = make_finding(f, Kind::uninitialized_read);
    loc_pc(fd.loc, sizeof fd.loc, pc);
    std::snprintf(fd.msg, sizeof fd.msg, "thread %s of block %s %s %s at {L}, which no thread of the block has written",
                  ids_text(f->hdr->threadIdx).c_str(), ids_text(f->hdr->blockIdx).c_str(),
                  kind == 2 ? "atomically updates" : "reads", what.c_str());
    add_finding(B->w, fd);
}

// One access as the race bookkeeping sees it (track): who, what, where, and how strong.
struct TrackedAccess {
    Launch *L;
    Fiber *f;
    Block *B;
    int kind;          // 0 read, 1 write, 2 atomic
    bool vol, global, cta, quiet_raw;
    bool strong;       // a strong access of global memory
    bool released;     // a strong store to shared memory after a fence of its thread since the last barrier
    uintptr_t pc;
    const Alloc *al;
};

// Whether a recorded access and this one are morally strong (the PTX memory model): both strong,
// and of one block or of scopes that include each other's thread (neither .cta). In shared
// memory, two volatile accesses race unless the store of the two is such a flag: without one,
// a volatile value read by another lane unordered is the warp-synchronous bug (since Volta the
// lanes need not run in lockstep), whose value depends on the order.
static bool morally_strong(const TrackedAccess &t, const Acc &a) {
    if (!t.global)
        return t.vol && (a.tm & kAccStrong) && (t.kind == 1 ? t.released : (a.tm & kAccReleased) != 0);
    return t.strong && (a.tm & kAccStrong) && (a.inst == t.B->inst || (!t.cta && !(a.tm & kAccCta)));
}

// Whether the recorded access a (live, overlapping the bytes `mask`) races with this one: neither
// morally strong nor ordered before it.
static bool races_with(const TrackedAccess &t, const Acc &a, uint32_t mask) {
    return (mask_of(a) & mask) && !morally_strong(t, a) && !ordered(t.L, t.B, t.f, a, t.global);
}

// Shared memory: a read or atomic update of bytes `mask` of word gi that no thread of the block has
// written is reported (uninit_read); a write or atomic update marks them written.
static void note_shared_init(const TrackedAccess &t, size_t gi, unsigned lo, uint32_t mask) {
    Block *B = t.B;
    if (t.kind != 1 && (B->init_inst[gi] != B->inst || (B->init_mask[gi] & mask) != mask))
        uninit_read(t.f, t.pc, gi * 4 + lo, t.kind);
    if (t.kind == 0) return;
    if (B->init_inst[gi] != B->inst) B->init_inst[gi] = B->inst, B->init_mask[gi] = 0;
    B->init_mask[gi] |= uint8_t(mask);
}

// A read of word c (bytes `mask`, the first at byte `at`): a race with the last write (read after
// write), then recorded as one of the word's two reads (the slot of a read it is ordered after, or
// of its own thread's).
static void track_read(const TrackedAccess &t, Cell &c, uint32_t mask, size_t at, const Acc &me) {
    Launch *L = t.L;
    bool live_w = c.w.inst >= L->inst_base && c.w.inst;
    if (live_w && !t.quiet_raw && races_with(t, c.w, mask))
        report_race(L, t.f, c.w, 0, t.pc, t.global, t.vol, t.al, at);
    for (Acc *r : {&c.r1, &c.r2}) {
        bool live = r->inst >= L->inst_base && r->inst && (r->inst != t.B->inst || !ordered(L, t.B, t.f, *r, t.global));
        if (!live || (r->inst == t.B->inst && thr_of(*r) == t.f->linear)) {
            *r = me;
            return;
        }
    }
}

// A write of word c (bytes `mask`, the first at byte `at`): a race with the last write (write after
// write), else with a recorded read (write after read), then recorded as the word's last write.
static void track_write(const TrackedAccess &t, Cell &c, uint32_t mask, size_t at, const Acc &me) {
    Launch *L = t.L;
    bool live_w = c.w.inst >= L->inst_base && c.w.inst;
    if (live_w && races_with(t, c.w, mask)) report_race(L, t.f, c.w, 2, t.pc, t.global, t.vol, t.al, at);
    for (Acc *r : {&c.r1, &c.r2}) {
        bool live = r->inst >= L->inst_base && r->inst;
        if (live && races_with(t, *r, mask)) {
            report_race(L, t.f, *r, 1, t.pc, t.global, t.vol, t.al, at);
            break;
        }
    }
    c.w = me;
}

// Race bookkeeping on the cells of one access. kind: 0 read, 1 write, 2 atomic (shared memory:
// bounds and initialisation only). `vol`: a strong access (volatile, or in global memory also an
// atomic; `cta`: an atomic of .cta scope); two strong accesses that are morally strong (the same
// block, or neither of .cta scope) are no data race between blocks. `quiet_raw`: the read was
// reported already (observe), so a read-after-write on it is not reported again.
void track(Launch *L, Fiber *f, Cell *cells, size_t off, unsigned size, int kind, bool vol, uintptr_t pc,
           bool global, bool cta, bool quiet_raw, const Alloc *al) {
    Block *B = f->blk;
    uint32_t now = L->clock.load(std::memory_order_relaxed);
    uint32_t pcoff = pc && g_module_base ? uint32_t(pc - g_module_base - 1) : 0;
    size_t g0 = off >> 2, g1 = (off + size - 1) >> 2;
    uint16_t rv = B->warps[f->linear / 32].serial;
    // A strong store to shared memory after a fence of this thread since the last barrier: a flag
    // that publishes what the thread did before the fence (message passing between warps: a release
    // pattern, the PTX ISA's "Memory Consistency Model"; tests/litmus/mp.cu, mp_shared_*).
    bool released = !global && vol && kind == 1 && f->lrel > B->last_bar_time;
    const TrackedAccess t{L, f, B, kind, vol, global, cta, quiet_raw, global && vol, released, pc, al};
    for (size_t gi = g0; gi <= g1; ++gi) {
        unsigned lo = gi == g0 ? unsigned(off & 3) : 0, hi = gi == g1 ? unsigned((off + size - 1) & 3) : 3;
        uint32_t mask = ((1u << (hi + 1)) - 1) & ~((1u << lo) - 1);
        if (!global) note_shared_init(t, gi, lo, mask);
        if (kind == 2) continue;
        Acc me{B->inst, now, pcoff,
               uint16_t(f->linear | mask << 10 | (vol ? kAccStrong : 0) | ((t.strong && cta) || released ? kAccCta : 0)),
               rv};
        if (!global && kind == 1) B->sh_rel[gi] = released ? f->lrel : 0;
        if (kind == 0) track_read(t, cells[gi], mask, gi * 4 + lo, me);
        else track_write(t, cells[gi], mask, gi * 4 + lo, me);
    }
}

}  // namespace sg::rt
