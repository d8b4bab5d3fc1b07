/* scangrade CPU emulator: what the compiled kernels and the runtime share.
 *
 * Included by prelude.h (force-included into every emulated translation unit) and by runtime.cpp.
 * Everything here is internal to one emulated module: the runtime is linked statically into each
 * module with hidden visibility, so two loaded modules never share state.
 *
 * Thread identity: every emulated CUDA thread runs on a fiber whose stack is a region of
 * __SG_STACK_SIZE bytes aligned to __SG_STACK_SIZE. The top __SG_HEADER_SIZE bytes of the region
 * hold the thread's __sg_ThreadCtx, so device code finds its threadIdx/blockIdx from the stack
 * pointer alone (no thread-local storage, no call).
 */
#ifndef SCANGRADE_SG_ABI_H
#define SCANGRADE_SG_ABI_H

#include <stddef.h>
#include <stdint.h>

#define __SG_HIDDEN __attribute__((visibility("hidden")))
#define __SG_STACK_SIZE ((uintptr_t)64 * 1024)
#define __SG_HEADER_SIZE ((uintptr_t)128)

/* CUDA's uint3 and dim3 (dim3 defaults missing extents to 1). */
struct uint3 {
    unsigned int x, y, z;
};

struct dim3 {
    unsigned int x, y, z;
    constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1) : x(vx), y(vy), z(vz) {}
    constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
    constexpr operator uint3() const { return uint3{x, y, z}; }
};

/* The per-thread context at the top of each fiber stack. */
struct __sg_ThreadCtx {
    uint3 threadIdx;
    uint3 blockIdx;
    dim3 blockDim;
    dim3 gridDim;
    void *fiber; /* the runtime's Fiber */
};

static_assert(sizeof(__sg_ThreadCtx) <= __SG_HEADER_SIZE, "thread context must fit the stack header");

/* The context of the calling emulated thread. Only valid on a fiber (inside a kernel). */
static inline __attribute__((always_inline)) const __sg_ThreadCtx *__sg_self(void) {
    uintptr_t sp;
#if defined(__x86_64__)
    __asm__("movq %%rsp, %0" : "=r"(sp));
#elif defined(__aarch64__)
    __asm__("mov %0, sp" : "=r"(sp));
#else
    sp = (uintptr_t)__builtin_frame_address(0);
#endif
    return (const __sg_ThreadCtx *)((sp | (__SG_STACK_SIZE - 1)) + 1 - __SG_HEADER_SIZE);
}

/* One function-scope or file-scope `__shared__` variable (static storage, constant-initialised by
 * the rewrite; id is assigned by the runtime on first use). */
struct __sg_slot {
    unsigned int id;
    const char *name;
    const char *file;
    int line;
};

/* Type-erased kernel call: invoke(fn, args) calls fn with *(T_i*)args[i]. */
typedef void (*__sg_invoke_fn)(void *fn, void *const *args);

extern "C" {
__SG_HIDDEN int __sg_register_kernel(const char *name, void *fn, __sg_invoke_fn invoke, int nargs);
__SG_HIDDEN void *__sg_shared(__sg_slot *slot, size_t size, size_t align);
__SG_HIDDEN void *__sg_dyn_shared(void);
__SG_HIDDEN void __syncthreads(void);
__SG_HIDDEN int __syncthreads_count(int predicate);
__SG_HIDDEN int __syncthreads_and(int predicate);
__SG_HIDDEN int __syncthreads_or(int predicate);
__SG_HIDDEN __attribute__((noreturn)) void __sg_trap(const char *file, int line, const char *func);
__SG_HIDDEN __attribute__((noreturn)) void __sg_unsupported(const char *what, const char *file, int line);
__SG_HIDDEN __attribute__((noreturn)) void __sg_assert_fail(const char *expr, const char *file, unsigned int line,
                                                            const char *func);
}

#endif
