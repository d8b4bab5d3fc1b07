// The runtime, block level: a fiber's context and the switch between fibers (a hand-written x86-64
// switch, or ucontext). The switch itself is defined in block/context.cpp.
#pragma once

#include "util.h"

namespace sg::rt {

// ---------------------------------------------------------------------------------------------
// Contexts: a hand-written x86-64 switch (callee-saved registers + stack pointer), or ucontext.
// ---------------------------------------------------------------------------------------------
#ifndef SG_UCONTEXT
struct Context {
    void *sp = nullptr;
};

extern "C" void __sg_switch(void **save_sp, void *new_sp) __attribute__((visibility("hidden")));
extern "C" void __sg_fiber_start() __attribute__((visibility("hidden")));

// __sg_switch: push the callee-saved registers, save rsp into *save_sp, load new_sp, pop, return.
// __sg_fiber_start: first "return" target of a fresh fiber; calls r13(r12) and never returns.

inline void switch_to(Context *from, Context *to) { __sg_switch(&from->sp, to->sp); }

// Prepare `cx` so that switching to it calls entry(arg) on the stack ending at `top`.
inline void prepare(Context *cx, char *stack_lo, char *top, void (*entry)(void *), void *arg) {
    (void)stack_lo;
    uintptr_t t = reinterpret_cast<uintptr_t>(top) & ~uintptr_t(15);
    void **sp = reinterpret_cast<void **>(t - 72);  // 8 mod 16: after popping 6 regs + ret, rsp is 16-aligned
    sp[0] = nullptr;                                 // r15
    sp[1] = nullptr;                                 // r14
    sp[2] = reinterpret_cast<void *>(entry);        // r13
    sp[3] = arg;                                     // r12
    sp[4] = nullptr;                                 // rbx
    sp[5] = nullptr;                                 // rbp
    sp[6] = reinterpret_cast<void *>(&__sg_fiber_start);
    sp[7] = nullptr;
    sp[8] = nullptr;
    cx->sp = sp;
}
#else
struct Context {
    ucontext_t uc;
};

inline void switch_to(Context *from, Context *to) { swapcontext(&from->uc, &to->uc); }

inline void ucontext_entry(unsigned int hi, unsigned int lo, unsigned int ehi, unsigned int elo) {
    void *arg = reinterpret_cast<void *>((uintptr_t(hi) << 32) | lo);
    auto entry = reinterpret_cast<void (*)(void *)>((uintptr_t(ehi) << 32) | elo);
    entry(arg);
    abort();
}

inline void prepare(Context *cx, char *stack_lo, char *top, void (*entry)(void *), void *arg) {
    getcontext(&cx->uc);
    cx->uc.uc_stack.ss_sp = stack_lo;
    cx->uc.uc_stack.ss_size = size_t(top - stack_lo) & ~size_t(15);
    cx->uc.uc_link = nullptr;
    uintptr_t a = reinterpret_cast<uintptr_t>(arg), e = reinterpret_cast<uintptr_t>(entry);
    makecontext(&cx->uc, reinterpret_cast<void (*)()>(&ucontext_entry), 4, unsigned(a >> 32), unsigned(a),
                unsigned(e >> 32), unsigned(e));
}
#endif

}  // namespace sg::rt
