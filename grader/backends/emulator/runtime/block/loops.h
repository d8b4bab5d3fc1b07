// The runtime, block level: endless loops and stale polls, by proof (defined in block/loops.cpp).
#pragma once

#include "grid/launch.h"

namespace sg::rt {

// ---------------------------------------------------------------------------------------------
// Endless loops, by proof. A block whose steps depend only on its own state is a deterministic
// transition system, and a deterministic system that comes back to a state it was in goes round
// the same cycle of states for ever (its next state is a function of the present one; the cycle
// search here is Brent's, "An improved Monte Carlo factorization algorithm", BIT 20, 1980). So a
// block whose state at a barrier release equals its state at an earlier release never ends, nor
// does its kernel: a `deadlock` (the kind of a kernel that cannot finish), naming the barriers of
// the loop. The states are compared byte for byte (no hash: no collision to rule out).
//
// The state (block_state): every live thread's registers and stack — a suspended fiber's
// callee-saved registers are pushed on its own stack (block/context.h), the caller-saved ones are
// dead across the call that suspended it, so its saved stack pointer and the bytes from there to
// the top of its stack region are all of it; a thread is compared with its own earlier state only
// (addresses on its stack are its own) — each thread's state (at the barrier or exited) and
// barrier site, the block's shared memory (the arena up to its last array) and array table, and
// what __syncthreads_count/_and/_or collect. Between two barrier releases the block's steps are a
// function of that state and of the memory outside it that it reads, when
//   * its thread order is (ascending or descending; the random order draws from a generator that
//     the state does not hold, and is not watched);
//   * either it is the launch's only block left (every block taken, no other resident here, every
//     other worker ended: last_block; nothing else can write memory again), and every 8-byte
//     chunk outside it that it accessed since the checkpoint is logged with its contents at the
//     checkpoint (the first access's, read before it: loop_note) and holds them again;
//   * or, while other blocks may still run, it read nothing outside its shared memory and its
//     threads' stacks since the checkpoint: its stores outside do not feed back into it, and the
//     other blocks, which run at its yields, cannot touch its state.
// So a wait for another block's flag (a look-back, with barriers in the loop) is never proof:
// its read of the flag makes the interval unprovable until the block is the launch's last, and
// then the flag's writer has ended. What a checked run records on the side (race shadow, clocks)
// steers no step of the kernel. Not seen: the middle bytes of a __tsan_read_range/_write_range
// (GCC reports the first and last byte of such a copy). A loop the proof cannot show (a spin with
// no barrier and no yield, a loop through a random order) runs to the grader's deadline, as on a
// GPU (CUDA Programming Guide, "Synchronization Functions": __syncthreads() waits until every
// thread of the block reaches it, and guarantees nothing about a loop around it).
// ---------------------------------------------------------------------------------------------
constexpr unsigned kWatchAfter = 64;  // barrier releases of a block before its watch starts: a scan
                                      // makes a few per doubling of n; watching costs time only
constexpr unsigned kLogSlots = 4096;  // chunks of memory outside the block logged, half at most

// Whether every worker of the launch but `me` has ended its loop (it holds no block).
inline bool others_idle(Launch *L, const Worker *me) {
    for (unsigned i = 0; i < L->nworkers; ++i)
        if (L->workers[i] != me && !L->workers[i]->idle.load()) return false;
    return true;
}

// Defined in block/loops.cpp (in_module, find_alloc: checks/bounds.cpp).
int poll_repeats(Block *B, bool watched);
void loop_note(Block *B, uintptr_t addr, unsigned size, int kind);
bool loop_step(Worker *w, Block *B, Fiber *first);
bool in_module(uintptr_t addr);
Alloc *find_alloc(Launch *L, uintptr_t addr);

// An access (kind 0 read, 1 write, 2 atomic) of `size` bytes at addr by thread f of block B,
// while B is watched for an endless loop (B->lv_on): its own stack and its block's shared memory
// are state already; anything else goes to loop_note.
inline void livelock_note(Fiber *f, Block *B, uintptr_t addr, unsigned size, int kind) {
    if (((addr ^ reinterpret_cast<uintptr_t>(f->hdr)) & ~(kStack - 1)) == 0) return;  // its own stack
    if (kind == 1) B->wrote = true;  // a store: no proof of a stale round (poll_repeats)
    if (addr - reinterpret_cast<uintptr_t>(B->arena) < B->arena_map_len) return;
    loop_note(B, addr, size, kind);
}

}  // namespace sg::rt
