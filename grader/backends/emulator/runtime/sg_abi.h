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
#pragma once

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
    /* The thread's virtual clock (clock64(), prelude.h): its memory accesses that the runtime saw
       (memory/access.h, plain_at; checks/access.cpp, check_access) and its clock reads, since its block started. Counted
       the same whether its block is checked or not, whatever the thread order (docs/emulator.md). */
    unsigned long long vclock;
    /* Whether the thread has read its clock since its block started: until it has, the clock is no
       part of its state for the proof of an endless loop (block/loops.cpp, block_state). */
    unsigned int vclock_read;
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

/* Bytes of one element of a (possibly multi-dimensional) array type: bounds messages name elements. */
template <class T> struct __sg_elem { typedef T type; };
template <class T, size_t N> struct __sg_elem<T[N]> { typedef typename __sg_elem<T>::type type; };
template <class T> struct __sg_elem<T[]> { typedef typename __sg_elem<T>::type type; };
template <class T> constexpr size_t __sg_elem_size() { return sizeof(typename __sg_elem<T>::type); }

/* Type-erased kernel call: invoke(fn, args) calls fn with *(T_i*)args[i]. */
typedef void (*__sg_invoke_fn)(void *fn, void *const *args);

/* Warp operations (__sg_warp_op) and atomic operations (__sg_atomic). */
enum {
    __SG_W_SYNC = 0, __SG_W_IDX, __SG_W_UP, __SG_W_DOWN, __SG_W_XOR, __SG_W_BALLOT, __SG_W_ANY, __SG_W_ALL,
    __SG_W_RADD, __SG_W_RMIN, __SG_W_RMAX, __SG_W_MATCH_ANY, __SG_W_MATCH_ALL, __SG_W_RAND, __SG_W_ROR,
    __SG_W_RXOR, __SG_W_ACTIVE, __SG_W_COUNT
};
enum {
    __SG_A_ADD = 0, __SG_A_SUB, __SG_A_AND, __SG_A_OR, __SG_A_XOR, __SG_A_EXCH, __SG_A_CAS, __SG_A_MIN, __SG_A_MAX,
    __SG_A_INC, __SG_A_DEC, __SG_A_LOAD,
    __SG_A_SIGNED = 0x100, __SG_A_FLOAT = 0x200,
    /* The scope of a CUDA atomic (atomicAdd_block: .cta; atomicAdd_system: .sys; else .gpu). */
    __SG_A_SCOPE_BLOCK = 0x400, __SG_A_SCOPE_SYS = 0x800
};
/* Yield points that are not memory accesses: __threadfence() (fence.sc.gpu), __nanosleep(),
   __threadfence_block() (fence.sc.cta), __threadfence_system() (fence.sc.sys). */
enum { __SG_Y_FENCE = 1, __SG_Y_SLEEP = 2, __SG_Y_FENCE_BLOCK = 3, __SG_Y_FENCE_SYS = 4 };
/* Thread scopes of the PTX memory model (.cta, .gpu, .sys), as cuda::thread_scope_block/device/system
   number them. __sg_scope(s) gives the next atomic or fence of the calling thread made by a __atomic
   builtin (the -fsanitize=thread hooks, which carry the memory order but no scope) scope s; without
   it such an operation has .gpu scope (cuda::atomic_ref's default is system; see <cuda/atomic>). */
enum { __SG_SCOPE_SYSTEM = 0, __SG_SCOPE_DEVICE = 1, __SG_SCOPE_BLOCK = 2, __SG_SCOPE_THREAD = 3 };
/* Jump statements the rewrite reports (rewrite/rewriter.py, _jump): what made a thread leave the others' path. */
enum { __SG_J_RETURN = 0, __SG_J_BREAK = 1, __SG_J_CONTINUE = 2 };

extern "C" {
__SG_HIDDEN int __sg_register_kernel(const char *name, void *fn, __sg_invoke_fn invoke, int nargs);
__SG_HIDDEN void *__sg_shared(__sg_slot *slot, size_t size, size_t align, size_t elem);
__SG_HIDDEN void *__sg_dyn_shared(const char *name, size_t elem);
__SG_HIDDEN int __sg_barrier(int kind, int predicate, const char *file, int line);
__SG_HIDDEN unsigned long long __sg_warp_op(int op, unsigned mask, unsigned long long value, int arg, int width,
                                            const char *file, int line);
/* __activemask() at a site: `ord` its index among the file's __activemask() calls (-1: unknown, as in
   a macro), [first, last] the indices of those in its innermost block, `loop` whether that block is a
   loop's body (rewrite/rewriter.py, _close_am_block; warp/device.cpp, Independent thread scheduling). */
__SG_HIDDEN unsigned __sg_activemask(int ord, int first, int last, int loop, const char *file, int line);
__SG_HIDDEN unsigned long long __sg_atomic(int op, void *addr, int size, unsigned long long a, unsigned long long b,
                                           const char *file, int line);
__SG_HIDDEN void __sg_yield_at(int what, const char *file, int line);
__SG_HIDDEN void __sg_scope(int scope);
/* memcpy, memmove and memset of student code, which the prelude binds to these names (also the calls
   the compiler makes for them): the bytes are checked and profiled as loads and stores (memory/hooks.cpp). */
__SG_HIDDEN void *__sg_memcpy(void *dst, const void *src, size_t n);
__SG_HIDDEN void *__sg_memmove(void *dst, const void *src, size_t n);
__SG_HIDDEN void *__sg_memset(void *dst, int value, size_t n);
/* The bulk copy's emulation (ptx.py) is one step of the issuing thread in the profile (memory/hooks.cpp). */
__SG_HIDDEN unsigned long long __sg_steps_mark(void);
__SG_HIDDEN void __sg_steps_one_since(unsigned long long mark);
__SG_HIDDEN void __sg_jump(int kind, const char *file, int line);
__SG_HIDDEN int __sg_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
__SG_HIDDEN __attribute__((noreturn)) void __sg_trap(const char *file, int line, const char *func);
__SG_HIDDEN __attribute__((noreturn)) void __sg_unsupported(const char *what, const char *file, int line);
/* A shift whose amount PTX clamps (prelude.h, __sg_shift_do): one warning per line and launch. */
__SG_HIDDEN __attribute__((cold)) void __sg_shift_clamped(const char *file, int line, int flags, int use_line,
                                                          const char *macro, unsigned long long amount, int bits,
                                                          int result);
__SG_HIDDEN __attribute__((noreturn)) void __sg_assert_fail(const char *expr, const char *file, unsigned int line,
                                                            const char *func);
}
