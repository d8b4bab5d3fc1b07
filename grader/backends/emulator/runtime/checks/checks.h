// The runtime, checks: the functions the checks' files share (the entry points the memory hooks call
// are declared in memory/access.h).
#pragma once

#include "memory/access.h"
#include "checks/findings.h"
#include "grid/output.h"

namespace sg::rt {

// The PTX memory model between blocks (checks/order.cpp).
const KView *snap_view(Launch *L, uint32_t id);
uint32_t snapshot(Launch *L, const KView &a, const KView &b, uint32_t last);
void release_point(Launch *L, Fiber *f);
void observed(Launch *L, const Pub &w, KView &v);
void take(Launch *L, Fiber *f, const Pub &w, bool acq, bool wide);
void note_dep(Launch *L, Fiber *f, const Pub &w, const Pub *at);
bool record_seen(Launch *L, const Fiber *f, const Pub *at, Pub *copy);
bool knows(const Fiber *f, uint32_t inst, unsigned thr, uint32_t time);
bool ordered(Launch *L, Block *B, Fiber *f, const Acc &a, bool global);

// Races, observed stores, uninitialised shared memory (checks/races.cpp).
void report_race(Launch *L, Fiber *f, const Acc &a, int which, uintptr_t pc, bool global, bool vol, const Alloc *al,
    size_t off);
void publish(Launch *L, Fiber *f, Pub &w, bool strong, bool cta, uintptr_t pc, const Pub *read, uint32_t prev);
void report_order(Launch *L, Fiber *f, const Pub &p, const Obs &o, bool writer_side, uintptr_t pc);
void report_chain(Launch *L, Fiber *f, const Pub &p, const Obs &o, uintptr_t pc, bool given);
void remember_read(Launch *L, Fiber *f, const Pub &w, uintptr_t pc);
bool observe(Launch *L, Fiber *f, const Pub &w, uintptr_t pc, bool rmw, const Pub *at = nullptr, Obs *chain =
    nullptr, bool *chained = nullptr);
bool give_stale(Launch *L, Fiber *f, const Alloc *al, uintptr_t addr, unsigned size, const Pub &w, const Pub *at,
    const Obs &chain, uintptr_t pc, bool vol, OrderLock &lock);
void uninit_read(Fiber *f, uintptr_t pc, size_t off, int kind);
void track(Launch *L, Fiber *f, Cell *cells, size_t off, unsigned size, int kind, bool vol, uintptr_t pc, bool
    global, bool cta = false, bool quiet_raw = false, const Alloc *al = nullptr);

// Allocations and bounds (checks/bounds.cpp).
size_t alloc_above(Launch *L, uintptr_t addr);
void buffer_range(const Alloc &a, uintptr_t *lo, uintptr_t *hi);
const Alloc *nearest_alloc(Launch *L, uintptr_t addr, unsigned size);
[[noreturn]] void bad_access(Fiber *f, Kind kind, uintptr_t pc, const std::string &msg);
const char *access_noun(int kind);
std::string element_text(const char *name, const char *what, uintptr_t base, uint64_t count, size_t elem, uintptr_t
    addr);
std::string element_at(const Block *B, const Alloc *al, size_t off);

}  // namespace sg::rt
