// The runtime, warp level: __activemask() under independent thread scheduling.
#include "warp/rendezvous.h"
#include "block/rounds.h"
#include "checks/findings.h"

namespace sg::rt {

// Gives the lanes of group g its arrived lanes as the result and makes them runnable.
void am_complete(Block *B, unsigned wi, MaskGroup &g, std::vector<unsigned> &to) {
    for (unsigned l = 0; l < 32; ++l) {
        if (!(g.arrived >> l & 1)) continue;
        Fiber &f = B->fibers[wi * 32 + l];
        f.wres = g.arrived;
        f.state = kRunnable;
        to.push_back(f.linear);
    }
    g.used = false;
    --B->am_pending;
    B->progress = true;
}

// After a round: completes the __activemask() groups of every warp whose window has closed.
void resolve_activemask(Block *B) {
    for (unsigned wi = 0; wi * 32 < B->n && B->am_pending; ++wi) {
        Warp &W = B->warps[wi];
        bool any = false;
        for (const MaskGroup &g : W.am) any |= g.used;
        if (!any) continue;
        bool running = false;
        for (unsigned l = 0; l < 32 && wi * 32 + l < B->n && !running; ++l) {
            FiberState st = B->fibers[wi * 32 + l].state;
            running = st == kRunnable || st == kYielded;
        }
        if (running) continue;
        MaskGroup *ready[4];
        unsigned nready = 0;
        MaskGroup *last = nullptr;
        for (MaskGroup &g : W.am) {
            if (!g.used) continue;
            if (!last || g.ord > last->ord) last = &g;
            bool waits = false;
            for (const MaskGroup &x : W.am) waits |= x.used && am_waits_on(g, x);
            if (!waits) ready[nready++] = &g;
        }
        if (!nready) ready[nready++] = last;  // groups that wait on each other: the last call first
        for (unsigned i = 0; i < nready; ++i) am_complete(B, wi, *ready[i], B->next);
    }
}

// A launch that would deadlock while lanes wait at an __activemask() for lanes of their warp that
// still run (spin-wait on something only the waiting lanes would do): a GPU guarantees the
// waiting lanes progress (independent thread scheduling), so they go on without the others, with a
// `warp-convergence` warning, as the mask is then unspecified. Returns whether any went on.
bool release_activemask(Block *B) {
    bool any = false;
    for (unsigned wi = 0; wi * 32 < B->n && B->am_pending; ++wi) {
        for (MaskGroup &g : B->warps[wi].am) {
            if (!g.used) continue;
            Fiber *first = nullptr, *spinner = nullptr;
            unsigned others = 0;
            for (unsigned l = 0; l < 32 && wi * 32 + l < B->n; ++l) {
                Fiber &f = B->fibers[wi * 32 + l];
                if (g.arrived >> l & 1) {
                    if (!first) first = &f;
                } else if (f.state == kRunnable || f.state == kYielded) {
                    others |= 1u << l;
                    if (!spinner) spinner = &f;
                }
            }
            if (first && spinner) {
                Finding fd = make_finding(first, Kind::warp_convergence);
                loc_site(fd.loc, sizeof fd.loc, g.file, g.line);
                if (spinner->poll_file)
                    loc_site(fd.other, sizeof fd.other, spinner->poll_file, spinner->poll_line);
                else
                    loc_pc(fd.other, sizeof fd.other, spinner->poll_pc);  // a volatile load's yield
                fd.has_other = fd.other[0] != '\0';
                fd.oblock = fd.block;
                fd.othread = spinner->hdr->threadIdx;
                std::snprintf(fd.msg, sizeof fd.msg,
                              "__activemask() at {L} returns 0x%08x in thread %s while lanes 0x%08x of its warp "
                              "still spin (thread %s %s): a GPU lets the lanes here go on without them, and CUDA "
                              "does not say which lanes count as active then; pass the warp intrinsics the mask "
                              "the code means",
                              g.arrived, ids_text(first->hdr->threadIdx).c_str(), others,
                              ids_text(spinner->hdr->threadIdx).c_str(),
                              fd.has_other ? "polls at {O}" : "has not arrived");
                add_finding(B->w, fd);
            }
            am_complete(B, wi, g, B->order);
            any = true;
        }
    }
    return any;
}

}  // namespace sg::rt
