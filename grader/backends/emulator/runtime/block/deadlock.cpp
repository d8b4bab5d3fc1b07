// The runtime, block level: stuck blocks, a round's end, deadlocks.
#include "block/rounds.h"
#include "block/loops.h"
#include "checks/findings.h"
#include "memory/access.h"
#include "warp/rendezvous.h"
#include "profile/profile.h"

namespace sg::rt {

// No thread of the block can run and not all wait at one barrier: report what waits where.
void Worker::stuck_block(Block *B) {
    Launch *L = launch;
    if (!L->checks) {
        // Lenient: a rendezvous whose missing lanes have all exited completes without them.
        for (unsigned wi = 0; wi * 32 < B->n; ++wi) {
            for (WarpGroup &g : B->warps[wi].g) {
                if (!g.used) continue;
                unsigned need = g.mask & existing_lanes(B, wi) & ~B->warps[wi].exited;
                if ((g.arrived & need) == need) {
                    if (WarpError err = complete_warp(B, wi, g, nullptr)) {
                        block_error(B, nullptr, err.kind, err.msg);
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
    Finding fd = make_finding(who, Kind::barrier_divergence);
    loc_site(fd.loc, sizeof fd.loc, who->site_file, who->site_line);
    std::string msg;
    if (at_warp && at_bar) {
        loc_site(fd.other, sizeof fd.other, at_bar->site_file, at_bar->site_line);
        fd.has_other = 1;
        fd.oblock = fd.block;
        fd.othread = at_bar->hdr->threadIdx;
        msg = format("thread %s waits at %s at {L} for lanes of its warp, while thread %s waits at __syncthreads() "
                     "at {O}: the threads of a block wait at different barriers%s",
                     ids_text(at_warp->hdr->threadIdx).c_str(), warp_op_name(at_warp->site_op),
                     ids_text(at_bar->hdr->threadIdx).c_str(), parting(at_warp, at_bar).c_str());
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
    if (B->am_pending) resolve_activemask(B);
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
        if (B && B->busy && (!B->stale || B->stale_at != T || B->stale_rounds < 2)) {
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
    Finding fd = make_finding(poller, Kind::deadlock);
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
    rec.kind = Kind::deadlock;
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

}  // namespace sg::rt
