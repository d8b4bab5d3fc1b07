// The runtime, memory level: the shadow of device memory (the last accesses of each 4-byte granule)
// and the launch's device allocations.
#pragma once

#include "util.h"
#include "memory/order.h"

namespace sg::rt {

// Shadow of one 4-byte granule: the last write and two readers (of distinct threads).
struct Acc {
    uint32_t inst;  // block instance (launch base + block index); 0: none
    uint32_t time;  // shared: barrier interval; global: launch clock
    uint32_t pc;    // pc offset in the module, or 0
    uint16_t tm;    // thread linear id (10 bits) | byte mask << 10 | volatile << 14
    uint16_t rv;    // warp rendezvous serial at the access
};
struct Cell {
    Acc w, r1, r2;
};

struct Alloc {
    uintptr_t base, size;
    Cell *shadow;
    size_t shadow_len;
    Pub *pub;  // per 4-byte word (checks), after the shadow cells in the same mapping
    uint64_t lo, count;  // labelled buffer: elements [lo, lo + count) of `elem` bytes are inside it
    unsigned elem;       // 0: unlabelled (the whole allocation is inside)
    char name[32];
};

inline uint32_t thr_of(const Acc &a) { return a.tm & 0x3ff; }
inline uint32_t mask_of(const Acc &a) { return (a.tm >> 10) & 0xf; }
// Acc::tm's top bits: a strong access (volatile or atomic), and an atomic of .cta scope only (global
// memory) or a strong store after a fence of its thread since the block's last barrier (shared).
constexpr uint16_t kAccStrong = 1u << 14, kAccCta = 1u << 15, kAccReleased = kAccCta;

}  // namespace sg::rt
