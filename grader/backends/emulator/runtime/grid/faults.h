// The runtime, grid level: the fault handlers of a launch's workers.
#pragma once

#include "grid/launch.h"

namespace sg::rt {

// ---------------------------------------------------------------------------------------------
// Faults of emulated threads. During a launch SIGSEGV, SIGBUS, SIGFPE and SIGILL are caught; a
// fault while a fiber runs ends that thread like a failed assert (the block stops, the launch
// reports it with the thread's ids). Any other fault restores the previous handler and returns,
// so it happens again under that handler (Python's faulthandler, or the default action).
// ---------------------------------------------------------------------------------------------
inline thread_local Worker *tl_worker = nullptr;
constexpr int kFaultSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL};
constexpr int kNumFaultSignals = int(sizeof kFaultSignals / sizeof kFaultSignals[0]);
inline struct sigaction g_previous[kNumFaultSignals];

inline void restore_handler(int sig) {
    for (int i = 0; i < kNumFaultSignals; ++i)
        if (kFaultSignals[i] == sig) sigaction(sig, &g_previous[i], nullptr);
}

inline void on_fault(int sig, siginfo_t *si, void *) {
    Worker *w = tl_worker;
    Fiber *f = w ? w->running : nullptr;
    if (!f) {
        restore_handler(sig);
        return;
    }
    if (tl_stale.addr) put_back_stale();  // a fault just after a load given an older value (give_stale)
    if (tl_order_held) {  // a fault inside a strong operation's check (memory/access.h, OrderLock)
        tl_order_held->store(false, std::memory_order_release);
        tl_order_held = nullptr;
    }
    uintptr_t addr = reinterpret_cast<uintptr_t>(si->si_addr);
    if (sig == SIGSEGV || sig == SIGBUS) {
        bool guard = false;
        if (w->fiber_owning(addr, &guard) && guard)
            w->fail(f, Kind::stack_overflow,
                    "the thread's stack overflowed (%zu KiB per emulated thread): a large local array or deep "
                    "recursion",
                    kStack / 1024);
        Block *B = f->blk;
        uintptr_t arena = reinterpret_cast<uintptr_t>(B->arena);
        if (B->arena && addr >= arena + B->arena_cap && addr < arena + B->arena_map_len)
            w->fail(f, Kind::illegal_address,
                    "access %zu bytes past the end of the block's shared-memory arena (its shared arrays, %zu "
                    "bytes, and the red zones around them)",
                    size_t(addr - arena - B->arena_cap), B->used);
        w->fail(f, Kind::illegal_address, "invalid memory access at address 0x%lx%s", (unsigned long)addr,
                addr < 65536 ? " (a null or small pointer)" : "");
    }
    if (sig == SIGFPE)
        w->fail(f, Kind::division_by_zero, "integer division by zero (or INT_MIN / -1)");
    w->fail(f, Kind::illegal_instruction,
            "illegal instruction (undefined behaviour, e.g. a non-void function without a return)");
}

inline void install_fault_handlers() {
    struct sigaction sa;
    std::memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = &on_fault;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < kNumFaultSignals; ++i) sigaction(kFaultSignals[i], &sa, &g_previous[i]);
}

inline void remove_fault_handlers() {
    for (int i = 0; i < kNumFaultSignals; ++i) sigaction(kFaultSignals[i], &g_previous[i], nullptr);
}

}  // namespace sg::rt
