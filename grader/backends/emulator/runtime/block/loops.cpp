// The runtime, block level: endless loops and stale polls, by proof.
#include "block/loops.h"
#include "block/rounds.h"
#include "checks/findings.h"
#include "memory/access.h"

namespace sg::rt {

// Whether B is the only block of the launch left: every block taken, no other resident in this
// worker, every other worker ended (so nothing but B can change memory).
static bool last_block(Worker *w, const Block *B) {
    Launch *L = w->launch;
    if (L->next_block.load() < L->nblocks) return false;
    for (auto &s : w->slots)
        if (s && s->busy && s.get() != B) return false;
    return others_idle(L, w);
}

void loop_note(Block *B, uintptr_t addr, unsigned size, int kind) {
    LoopWatch &lw = B->lw;
    if (!lw.have || lw.unprovable) return;
    if (!lw.lone) {
        if (kind != 1) lw.unprovable = true;  // it read memory another block may write
        return;
    }
    Launch *L = B->w->launch;
    if (!L->allocs.empty()) {  // the table of device memory (checks): read only what the access may
        const Alloc *al = find_alloc(L, addr);
        bool ok = al ? addr + size <= al->base + al->size : in_module(addr);
        for (auto &s : B->w->slots)
            ok = ok || (s && s->owns_stack(addr));
        if (!ok) {
            lw.unprovable = true;  // the access fails; its check says how
            return;
        }
    }  // else the chunks hold the access's bytes (same pages): reading them faults where it does
    for (uintptr_t c = addr & ~uintptr_t(7); c < addr + size; c += 8) {
        unsigned h = unsigned(((c >> 3) * 0x9e3779b97f4a7c15ull) >> 52) & (kLogSlots - 1);
        while (lw.keys[h] && lw.keys[h] != c) h = (h + 1) & (kLogSlots - 1);
        if (lw.keys[h]) continue;  // logged: its contents at the checkpoint are known
        if (lw.used.size() >= kLogSlots / 2) {
            lw.unprovable = true;  // too much to log
            return;
        }
        lw.keys[h] = c;
        std::memcpy(&lw.vals[h], reinterpret_cast<const void *>(c), 8);
        lw.used.push_back(h);
    }
}

// ---- A stale poll, by proof ----------------------------------------------------------------
// A round of B in which no thread made progress the runtime sees (no barrier or warp completed, no
// thread exited, every yield read the value it read at that place before: yield_here) is stale
// only if, besides, its threads stored nothing outside their own stacks (B->wrote, while watched)
// and every thread that yielded stands where it stood at its previous yield: its registers and
// stack (saved stack pointer to the top of its region, as in block_state) hash the same. A thread
// whose state is a fixed point of its step between two yields, under memory that no thread changes,
// takes that step for ever; where every thread of every resident block does so at the same
// progress count (Worker::deadlock_check), nothing can change memory again: a deadlock. A poll that
// counts in a register (`for (i = 0; i < k && !*flag; ++i)`) changes its state each step and is
// no proof. Two independent 64-bit hashes of the stack (a false match about 2^-128).
// Where a suspended fiber's saved stack (its registers pushed on it) begins; null under ucontext,
// whose registers are in the context itself: there the proofs are not made (loop_step), and a
// thread counts as back in its state at every poll (stack_hash), as before the proof.
inline const char *saved_sp(const Fiber &f) {
#ifdef SG_UCONTEXT
    (void)f;
    return nullptr;
#else
    return static_cast<const char *>(f.cx.sp);
#endif
}

// While it lives, the virtual clock (sg_abi.h) of thread f reads 0 unless f has read it: it counts
// the thread's accesses, which a thread that never reads it cannot tell apart, so it is no part of
// the thread's state for the proofs below (a loop that reads its clock keeps it).
struct ClockHidden {
    __sg_ThreadCtx *h;
    unsigned long long saved;
    explicit ClockHidden(const Fiber &f) : h(f.hdr), saved(f.hdr->vclock) {
        if (!h->vclock_read) h->vclock = 0;
    }
    ~ClockHidden() { h->vclock = saved; }
};

static void stack_hash(const Fiber &f, uint64_t h[2]) {
    ClockHidden clock(f);
    const unsigned char *top = reinterpret_cast<const unsigned char *>(f.hdr) + kHeader;
    const unsigned char *p = saved_sp(f) ? reinterpret_cast<const unsigned char *>(saved_sp(f)) : top;
    uint64_t a = 0x9e3779b97f4a7c15ull ^ uint64_t(top - p), b = 0xc2b2ae3d27d4eb4full + uint64_t(top - p);
    for (; p + 8 <= top; p += 8) {
        uint64_t v;
        std::memcpy(&v, p, 8);
        a = (a ^ v) * 0xff51afd7ed558ccdull, a ^= a >> 29;
        b = (b + v) * 0xc4ceb9fe1a85ec53ull, b ^= b >> 31;
    }
    for (; p < top; ++p) a = (a ^ *p) * 0x100000001b3ull, b = (b + *p) * 0x9e3779b97f4a7c15ull;
    h[0] = a, h[1] = b;
}

// After a round of B that made no progress the runtime sees (its yielded threads in B->order):
// 0 when it is stale by proof (above), 2 when a thread stored or changed its state (progress),
// 1 when it cannot tell yet (the round was not watched, or a thread's previous yield is not
// recorded). Records each yielded thread's state for the next round. `watched`: B->lv_on all round.
int poll_repeats(Block *B, bool watched) {
    int r = watched && !B->wrote ? 0 : B->wrote && watched ? 2 : 1;
    for (unsigned t : B->order) {
        Fiber &f = B->fibers[t];
        if (f.state != kYielded) continue;
        uint64_t h[2];
        stack_hash(f, h);
        if (f.yround + 1 != B->rounds) r = r == 2 ? 2 : 1;
        else if (h[0] != f.yhash[0] || h[1] != f.yhash[1]) r = 2;
        f.yhash[0] = h[0], f.yhash[1] = h[1], f.yround = B->rounds;
    }
    return r;
}

// Writes B's state (the section's comment) after `out`, or compares it with `ref`.
struct StateBytes {
    std::vector<unsigned char> *out = nullptr;
    const std::vector<unsigned char> *ref = nullptr;
    size_t pos = 0;
    bool same = true;
    void put(const void *p, size_t n) {
        if (out) {
            size_t at = out->size();
            out->resize(at + n);
            std::memcpy(out->data() + at, p, n);
        } else if (same) {
            same = pos + n <= ref->size() && std::memcmp(ref->data() + pos, p, n) == 0;
            pos += n;
        }
    }
    template <class T> void val(const T &v) { put(&v, sizeof v); }
};

// B's state at a barrier release (every live thread waits at the barrier): with `s.ref`, whether
// it equals the one written there. Cheap differences first (a counter on a stack ends it early).
static bool block_state(Block *B, StateBytes &s) {
    s.val(B->live), s.val(B->bump), s.val(B->arrays.size());
    s.val(B->acc_count), s.val(B->acc_and), s.val(B->acc_or), s.val(B->rel_count), s.val(B->rel_and),
        s.val(B->rel_or);
    for (unsigned t = 0; t < B->n && s.same; ++t) {
        const Fiber &f = B->fibers[t];
        s.val(f.state);
        if (f.state == kDone) continue;
        s.val(f.site_file), s.val(f.site_line);
        s.val(reinterpret_cast<uintptr_t>(f.hdr) + kHeader - reinterpret_cast<uintptr_t>(saved_sp(f)));
    }
    s.put(B->arena, B->bump);
    for (unsigned t = 0; t < B->n && s.same; ++t) {
        const Fiber &f = B->fibers[t];
        if (f.state == kDone) continue;
        const char *sp = saved_sp(f);
        ClockHidden clock(f);
        if (sp) s.put(sp, size_t(reinterpret_cast<const char *>(f.hdr) + kHeader - sp));
    }
    return s.same && (!s.ref || s.pos == s.ref->size());
}

// Whether every chunk of memory outside B logged since the checkpoint holds what it held then.
static bool same_memory(const LoopWatch &lw) {
    for (unsigned h : lw.used) {
        uint64_t v;
        std::memcpy(&v, reinterpret_cast<const void *>(lw.keys[h]), 8);
        if (v != lw.vals[h]) return false;
    }
    return true;
}

static void note_site(LoopWatch &lw, const Fiber *first) {
    for (unsigned i = 0; i < lw.nsites; ++i)
        if (lw.site_line[i] == first->site_line && same_file(lw.site_file[i], first->site_file)) return;
    if (lw.nsites < 4) lw.site_file[lw.nsites] = first->site_file, lw.site_line[lw.nsites++] = first->site_line;
}

// B's present state becomes the checkpoint (Brent's tortoise), with an empty log.
static void checkpoint(Block *B, bool lone, const Fiber *first) {
    LoopWatch &lw = B->lw;
    lw.ckpt.clear();
    StateBytes w;
    w.out = &lw.ckpt;
    block_state(B, w);
    if (lone && lw.keys.empty()) lw.keys.assign(kLogSlots, 0), lw.vals.assign(kLogSlots, 0);
    for (unsigned h : lw.used) lw.keys[h] = 0;
    lw.used.clear();
    lw.have = true, lw.lone = lone, lw.unprovable = false;
    lw.lam = 0, lw.nsites = 0;
    note_site(lw, first);
    B->lv_on = true;
}

// A barrier of B releases, every live thread at `first`'s: whether B's state is one it was in at
// the checkpoint, so that it loops for ever (reported, and B ends). Else the checkpoint moves as
// Brent's search moves it: when the states since it reach `power`, which then doubles, so a cycle
// of c releases entered after m is found within about 2(m + c) releases.
bool loop_step(Worker *w, Block *B, Fiber *first) {
    Launch *L = w->launch;
    LoopWatch &lw = B->lw;
    if (!saved_sp(*first) || !L->detect_deadlock || L->schedule == kRandom || ++lw.releases < kWatchAfter)
        return false;  // (no saved stack pointer: ucontext, whose registers are not on the stack)
    bool lone = last_block(w, B);
    if (!lw.have || lw.unprovable || lone != lw.lone) {
        lw.power = 1;
        checkpoint(B, lone, first);
        return false;
    }
    StateBytes cmp;
    cmp.ref = &lw.ckpt;
    if (!block_state(B, cmp) || !same_memory(lw)) {
        note_site(lw, first);
        if (++lw.lam >= lw.power) {
            lw.power *= 2;
            checkpoint(B, lone, first);
        }
        return false;
    }
    Finding fd = make_finding(first, Kind::deadlock);
    loc_site(fd.loc, sizeof fd.loc, first->site_file, first->site_line);
    std::string sites;
    for (unsigned i = 0; i < lw.nsites; ++i) {
        if (lw.site_line[i] == first->site_line && same_file(lw.site_file[i], first->site_file)) continue;
        if (!fd.has_other) {
            loc_site(fd.other, sizeof fd.other, lw.site_file[i], lw.site_line[i]);
            fd.has_other = 1, fd.oblock = fd.block, fd.othread = fd.thread;
            sites += " and {O}";
        } else {
            sites += format(" and %s:%d", lw.site_file[i], lw.site_line[i]);
        }
    }
    std::snprintf(fd.msg, sizeof fd.msg,
                  "the kernel never ends: block %s goes round a loop through the __syncthreads() at {L}%s for ever: "
                  "%llu barrier%s after an earlier one, every thread's registers and stack, the block's shared "
                  "memory%s are what they were then, byte for byte, and %s, so it repeats the same steps again "
                  "and again — check the loop's condition: does something in the loop move it towards its end?",
                  ids_text(first->hdr->blockIdx).c_str(), sites.c_str(), (unsigned long long)lw.lam + 1,
                  lw.lam ? "s" : "", lone ? " and the memory it touched" : "",
                  lone ? "it is the launch's only block left (nothing else can change memory)"
                       : "it read no memory that another block can write");
    add_finding(w, fd);
    w->block_error(B, first, fd.kind, fd.msg);
    return true;
}

}  // namespace sg::rt
