// The runtime, checks: making and keeping the findings of a launch.
#pragma once

#include "grid/launch.h"

namespace sg::rt {

// ---------------------------------------------------------------------------------------------
// Findings (checks) and failures.
// ---------------------------------------------------------------------------------------------
inline void loc_pc(char *dst, size_t cap, uintptr_t pc) {
    if (pc && g_module_base && pc > g_module_base)
        std::snprintf(dst, cap, "@%lx", (unsigned long)(pc - g_module_base - 1));
    else
        dst[0] = '\0';
}

inline void loc_site(char *dst, size_t cap, const char *file, int line) {
    if (file)
        std::snprintf(dst, cap, "%s:%d", file, line);
    else
        dst[0] = '\0';
}

// Adds a finding unless an equal one (kind, both locations) was seen; an equal one of a lower block
// replaces it, so the finding kept does not depend on which worker ran which block first (the
// same message every run). Returns whether it is new.
inline bool add_finding(Worker *w, const Finding &fd) {
    Launch *L = w->launch;
    uint64_t h = 1469598103934665603ull;
    for (const char *s : {kind_name(fd.kind), fd.loc, fd.other})
        for (; *s; ++s) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    h |= 1;
    size_t slot = h % 4096;
    for (size_t i = 0; i < 8; ++i) {
        uint64_t &e = w->dedup[(slot + i) % 4096], &eb = w->dedup_block[(slot + i) % 4096];
        if (e == h && eb <= fd.block_linear) return false;
        if (e == h || e == 0) {
            e = h, eb = fd.block_linear;
            break;
        }
    }
    std::lock_guard<std::mutex> lock(L->fmu);
    for (Finding &o : L->findings)
        if (o.kind == fd.kind && !std::strcmp(o.loc, fd.loc) && !std::strcmp(o.other, fd.other)) {
            if (fd.block_linear < o.block_linear) o = fd, o.seq = L->fseq++;
            return false;
        }
    if (L->findings.size() >= kMaxFindings) {
        ++L->fdropped;
        return false;
    }
    L->findings.push_back(fd);
    L->findings.back().seq = L->fseq++;
    return true;
}

inline Finding make_finding(Fiber *f, Kind kind) {
    Finding fd;
    std::memset(&fd, 0, sizeof fd);
    fd.kind = kind;
    if (f) {
        fd.block = f->hdr->blockIdx;
        fd.thread = f->hdr->threadIdx;
        fd.block_linear = f->blk->linear;
    }
    return fd;
}

inline uint3 thread_ids(const Launch *L, unsigned t) {
    const dim3 bd = L->block;
    return uint3{t % bd.x, (t / bd.x) % bd.y, t / (bd.x * bd.y)};
}

inline uint3 block_ids(const Launch *L, uint64_t b) {
    const dim3 g = L->grid;
    return uint3{unsigned(b % g.x), unsigned((b / g.x) % g.y), unsigned(b / (uint64_t(g.x) * g.y))};
}

}  // namespace sg::rt
