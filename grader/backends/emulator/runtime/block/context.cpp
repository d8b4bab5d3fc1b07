// The runtime, block level: the x86-64 context switch (block/context.h).
#include "block/context.h"

#ifndef SG_UCONTEXT  // else ucontext's swapcontext

namespace sg::rt {

asm(R"(
    .text
    .p2align 4
    .globl __sg_switch
    .hidden __sg_switch
    .type __sg_switch, @function
__sg_switch:
    .cfi_startproc
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .cfi_endproc
    .size __sg_switch, .-__sg_switch

    .p2align 4
    .globl __sg_fiber_start
    .hidden __sg_fiber_start
    .type __sg_fiber_start, @function
__sg_fiber_start:
    .cfi_startproc
    .cfi_undefined rip
    movq %r12, %rdi
    callq *%r13
    ud2
    .cfi_endproc
    .size __sg_fiber_start, .-__sg_fiber_start
)");
#endif

}  // namespace sg::rt
