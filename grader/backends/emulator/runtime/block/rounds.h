// The runtime, block level: running a block in rounds (defined in block/rounds.cpp).
#pragma once

#include "grid/launch.h"
#include "checks/finding.h"

namespace sg::rt {

// ---------------------------------------------------------------------------------------------
// Running a block: rounds, thread entry, barriers, warp rendezvous, stuck blocks, deadlock.
// ---------------------------------------------------------------------------------------------
// Switch from `from` to the next thread of this round, or back to the scheduler.
inline void Worker::next_in_round(Fiber *from) {
    Block *B = from->blk;
    vstore.store(nullptr, std::memory_order_relaxed);
    vload.store(nullptr, std::memory_order_relaxed);
    unsigned c = ++B->cursor;
    Fiber *nx = c < B->order.size() ? &B->fibers[B->order[c]] : nullptr;
    running = nx;
    switch_to(&from->cx, nx ? &nx->cx : &sched);
}

// Defined in block/rounds.cpp.
[[noreturn]] void fatal_finding(Fiber *f, Finding &fd);
std::string ids_text(uint3 t);
void fiber_main(void *arg);
int parting_jump(const Fiber *x, const Fiber *y);
const char *jump_word(int kind);
std::string parting(const Fiber *a, const Fiber *b);
void yield_here(Fiber *f, const char *what, const char *file, int line, uintptr_t pc, const void *addr,
                unsigned size);

}  // namespace sg::rt
