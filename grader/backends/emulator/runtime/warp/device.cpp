// The runtime, warp level: the device-side entry points of the warp intrinsics.
#include "warp/rendezvous.h"
#include "block/rounds.h"
#include "checks/findings.h"
#include "memory/access.h"
#include "profile/profile.h"

using namespace sg::rt;

extern "C" {

// The lanes of the warp that execute this call together (warp/activemask.cpp, resolve_activemask): the
// caller waits at the site until its warp's window closes. Not a synchronisation: no memory order.
unsigned __sg_activemask(int ord, int first, int last, int loop, const char *file, int line) {
    Fiber *f = current_fiber();
    Block *B = f->blk;
    Warp &W = B->warps[f->linear / 32];
    MaskGroup *g = nullptr, *free_slot = nullptr;
    for (MaskGroup &x : W.am) {
        if (!x.used) {
            if (!free_slot) free_slot = &x;
        } else if (x.ord == ord && x.line == line && same_file(x.file, file)) {
            g = &x;
        }
    }
    if (!g) {
        if (!free_slot)
            B->w->fail(f, Kind::unsupported, "not supported by the emulator: lanes of one warp waiting at more than 4 "
                                         "__activemask() calls at once (%s:%d)", file, line);
        g = free_slot;
        *g = MaskGroup{true, ord, first, last, loop != 0, 0, file, line};
        ++B->am_pending;
    }
    g->arrived |= 1u << (f->linear % 32);
    f->site_file = file;
    f->site_line = line;
    f->site_op = __SG_W_ACTIVE;
    f->state = kAtWarp;
    B->progress = true;
    B->w->next_in_round(f);
    f->state = kRunnable;
    return unsigned(f->wres);
}

}  // extern "C"

namespace sg::rt {
// A fatal finding of kind `kind` at a warp intrinsic (file:line) of thread `f`.
[[noreturn]] void warp_error(Fiber *f, Kind kind, const char *file, int line, const std::string &msg) {
    Finding fd = make_finding(f, kind);
    loc_site(fd.loc, sizeof fd.loc, file, line);
    std::snprintf(fd.msg, sizeof fd.msg, "%s", msg.c_str());
    fatal_finding(f, fd);
}
}  // namespace sg::rt

extern "C" {

unsigned long long __sg_warp_op(int op, unsigned mask, unsigned long long value, int arg, int width,
                                const char *file, int line) {
    Fiber *f = current_fiber();
    Block *B = f->blk;
    Worker *w = B->w;
    unsigned lane = f->linear % 32, wi = f->linear / 32;
    if (!(mask >> lane & 1))
        warp_error(f, Kind::barrier_divergence, file, line,
                   format("thread %s calls %s at {L} with mask 0x%08x, which does not name its own lane %u",
                          ids_text(f->hdr->threadIdx).c_str(), warp_op_name(op), mask, lane));
    if (width < 1 || width > 32 || (width & (width - 1)))
        warp_error(f, Kind::barrier_divergence, file, line,
                   format("%s at {L}: width %d is not a power of two from 1 to 32", warp_op_name(op), width));
    unsigned need = mask & existing_lanes(B, wi);
    if (unsigned gone = need & B->warps[wi].exited) {  // lanes named in the mask that have returned
        unsigned l = unsigned(__builtin_ctz(gone));
        if (w->launch->checks) {
            Finding fd = make_finding(f, Kind::barrier_divergence);
            loc_site(fd.loc, sizeof fd.loc, file, line);
            std::snprintf(fd.msg, sizeof fd.msg,
                          "thread %s calls %s at {L} with mask 0x%08x, but lane %u of its warp, named in the mask, "
                          "has exited",
                          ids_text(f->hdr->threadIdx).c_str(), warp_op_name(op), mask, l);
            fatal_finding(f, fd);
        }
        need &= ~gone;
    }
    Warp &W = B->warps[wi];
    WarpGroup *g = nullptr;
    for (WarpGroup &x : W.g) {
        if (!x.used) continue;
        if (x.mask == mask) {
            g = &x;
            break;
        }
        // Lanes at this call with another mask that overlaps: they disagree on the call's lanes (a
        // GPU hangs or gives garbage). At another call, those lanes run ahead of (or behind) this
        // one's, and each call completes when its own lanes arrive (two halves with masks of their
        // own; a rendezvous that can never complete is reported when the block is stuck).
        if ((x.mask & mask) && x.line == line && same_file(x.file, file))
            warp_error(f, Kind::barrier_divergence, file, line,
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
        if (!g) w->fail(f, Kind::unsupported, "more than 32 concurrent warp rendezvous in one warp (%s:%d)", file, line);
        *g = WarpGroup{true, mask, 0, op, width, file, line};
    } else if (g->op != op || (op != __SG_W_SYNC && g->width != width)) {
        warp_error(f, Kind::barrier_divergence, file, line,
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
        if (WarpError err = complete_warp(B, wi, *g, f)) warp_error(f, err.kind, file, line, err.msg);
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
    uintptr_t pc = reinterpret_cast<uintptr_t>(__builtin_return_address(0));
    if (g_profile) profile_step(f, reinterpret_cast<uintptr_t>(addr));  // an atomic is a step of the thread (profile/profile.h), in no bank count
    if (f->blk->checked) check_access(reinterpret_cast<uintptr_t>(addr), unsigned(size), 2, false, pc);  // bounds first
    else plain_access(reinterpret_cast<uintptr_t>(addr), unsigned(size), 2, pc);
    bool checked = f->blk->checked;  // after the bounds check (a sampled block's share of checks may end there)
    bool changed = false;
    uint64_t old;
    {
        OrderLock lock(f);
        // CUDA's atomics are relaxed, of .gpu scope unless *_block (.cta) or *_system (.sys)
        AtomicOp ao{-1,
                    op & __SG_A_SCOPE_BLOCK ? __SG_SCOPE_BLOCK
                    : op & __SG_A_SCOPE_SYS ? __SG_SCOPE_SYSTEM
                                            : __SG_SCOPE_DEVICE,
                    true, (op & 0xff) != __SG_A_LOAD, false, {}};
        if (checked) words_before(ao, addr, unsigned(size));
        old = do_atomic(op, addr, size, a, b, &changed);
        ao.wrote = changed;
        if (checked) atomic_order(f, reinterpret_cast<uintptr_t>(addr), unsigned(size), ao, pc);
    }
    if (f->stale_ready) {  // a load given an older value of its word (checks/races.cpp, give_stale)
        f->stale_ready = false;
        old = 0;
        std::memcpy(&old, f->stale_val, size_t(size));
    }
    if (changed) f->blk->progress = true;
    yield_here(f, "an atomic operation", file, line, 0, addr, unsigned(size));
    return old;
}

}  // extern "C"
