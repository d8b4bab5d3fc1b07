// The runtime, warp level: the state of one warp's rendezvous (warp intrinsics) and __activemask()
// groups.
#pragma once

#include "util.h"

namespace sg::rt {

struct WarpGroup {
    bool used;
    unsigned mask, arrived;
    int op, width;
    const char *file;
    int line;
};
// Lanes waiting at one __activemask() site (warp/activemask.cpp, resolve_activemask): the site's index
// among its file's calls and the indices of its innermost block ([first, last], a loop's body or not).
struct MaskGroup {
    bool used;
    int ord, first, last;
    bool loop;
    unsigned arrived;
    const char *file;
    int line;
};
struct Warp {
    WarpGroup g[32];  // one per concurrent mask: up to 32 tiles of one lane
    MaskGroup am[4];
    uint16_t serial;
    uint32_t exited;  // lanes whose thread has returned (state kDone): a warp op reads it, not 32 fibers
};

}  // namespace sg::rt
