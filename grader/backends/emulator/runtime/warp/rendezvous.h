// The runtime, warp level: completing a warp rendezvous and the __activemask() groups (defined in
// warp/rendezvous.cpp and warp/activemask.cpp).
#pragma once

#include "grid/launch.h"

namespace sg::rt {

// What completing a warp rendezvous found wrong: its failure kind and message (empty when fine). The
// kind is given where the error is found, and each caller reports it as it is, so a warp error can
// have a kind of its own (sg_kinds.h, and its row in grader/core/kinds.py).
struct WarpError {
    Kind kind = Kind::barrier_divergence;
    std::string msg;
    explicit operator bool() const { return !msg.empty(); }
};

const char *warp_op_name(int op);

WarpError complete_warp(Block *B, unsigned wi, WarpGroup &g, Fiber *self);
bool release_activemask(Block *B);
void resolve_activemask(Block *B);

// Lane mask of the lanes of warp wi that exist in the block.
inline unsigned existing_lanes(const Block *B, unsigned wi) {
    unsigned have = B->n - wi * 32;
    return have >= 32 ? 0xffffffffu : ((1u << have) - 1);
}

// ---------------------------------------------------------------------------------------------
// __activemask() under independent thread scheduling (sm_70+). On a GPU it returns the lanes of
// the warp that execute the call together, and a diverged warp reconverges where the compiler
// put the branch's end (the immediate post-dominator; measured on an H100: inside `if (lane <
// 16)` 0x0000ffff, after the branch or a loop of lane-dependent trip count 0xffffffff, in each
// arm of an if/else its own lanes, in a loop the lanes of that iteration). Here lanes do not run
// in lockstep, so a lane that calls __activemask() waits at the call site, and the lanes waiting
// there become the result once the window of that warp closes: every other live lane of the warp
// has stopped (at a __syncthreads(), at a warp intrinsic, at an __activemask() or exited). A
// lane paused at a yield point (atomic, volatile access, fence) still runs: it is waited for.
// Reconvergence: a site also waits while lanes wait at a site that control reaches it from
// without leaving its innermost block (the rewrite numbers the file's calls: a call of that block
// earlier in the text, or anywhere in it when the block is a loop's body), since on a GPU those
// lanes arrive together with it. Groups waiting on each other (a loop whose body's calls precede
// one another both ways) resolve from the last call in the text. See docs/emulator.md.
// ---------------------------------------------------------------------------------------------

// Whether lanes at group `x` can still reach site `g` before the warp diverges again: g waits.
inline bool am_waits_on(const MaskGroup &g, const MaskGroup &x) {
    if (&g == &x || g.ord < 0 || x.ord < 0 || !same_file(g.file, x.file)) return false;
    if (x.ord >= g.first && x.ord < g.ord) return true;
    return g.loop && x.ord > g.ord && x.ord <= g.last;
}

}  // namespace sg::rt
