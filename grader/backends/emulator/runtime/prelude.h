/* scangrade CPU emulator prelude: force-included (-include) before every emulated file.
 *
 * Provides the CUDA C++ device dialect on the host compiler: execution-space and attribute
 * macros, built-in variables (threadIdx, blockIdx, blockDim, gridDim, warpSize), barriers,
 * atomics, integer intrinsics, vector types, device printf/assert/__trap.
 *
 * `__shared__` is handled by the Python source rewrite (rewrite/), which turns every
 * declaration into a reference into the block's shared-memory arena; a `__shared__` the rewrite
 * could not see (e.g. produced by a macro) is reported by the compiler as not supported.
 */
#pragma once  /* not an include guard: no macro of ours names the emulator (see below) */

#include <assert.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmath>
#include <type_traits>
#include <utility>

#include "sg_abi.h"

/* memcpy, memmove and memset in student code are the runtime's (memory/hooks.cpp), which check and
 * profile the bytes they touch as loads and stores: libc's would read and write device and shared
 * memory unseen (an out-of-bounds copy unchecked; a serial scan copying its input into a local array
 * with no step counted). The asm label binds every call, std:: and __builtin_ ones and those the
 * compiler makes itself. */
extern "C" void *memcpy(void *, const void *, size_t) noexcept __asm__("__sg_memcpy");
extern "C" void *memmove(void *, const void *, size_t) noexcept __asm__("__sg_memmove");
extern "C" void *memset(void *, int, size_t) noexcept __asm__("__sg_memset");

/* No macro names the emulator to the code it compiles: a file could otherwise hold a correct scan
 * for the emulator and another, racy one for a GPU. The compile command predefines what nvcc's device
 * pass for the course's GPU does (the config's target_arch: __CUDA_ARCH__ 900 for an H100,
 * __CUDACC__, __NVCC__, __CUDACC_VER_MAJOR__...; grader/backends/emulator/macros.py), so an
 * `#if __CUDA_ARCH__ >= 800` takes the branch here that it takes on that GPU. What still differs
 * from nvcc is in docs/security.md. */
#ifndef __CUDA_ARCH__
#error "the emulator's compile predefines __CUDA_ARCH__ (grader/backends/emulator/macros.py)"
#endif

/* ---- execution spaces and attributes ---------------------------------------------------- */
#define __global__
#define __device__
#define __host__
#define __constant__
#define __managed__
#define __forceinline__ inline
/* Empty on purpose: libstdc++ writes __attribute__((__noinline__)). */
#define __noinline__
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
#define __grid_constant__
#define __cudart_builtin__
/* A `__shared__` that survived the rewrite (e.g. hidden in a macro) cannot be emulated. */
#define __shared__ _Pragma("GCC error \"not supported by the emulator: __shared__ produced by a macro or in this position\"")

/* ---- built-in variables ----------------------------------------------------------------- */
#define threadIdx (__sg_self()->threadIdx)
#define blockIdx (__sg_self()->blockIdx)
#define blockDim (__sg_self()->blockDim)
#define gridDim (__sg_self()->gridDim)
#define warpSize 32

/* ---- device assert and trap ------------------------------------------------------------- */
#if !defined(__GLIBC__)
/* glibc's assert calls __assert_fail, which the runtime defines; elsewhere replace the macro. */
#undef assert
#ifdef NDEBUG
#define assert(e) ((void)0)
#else
#define assert(e) ((e) ? (void)0 : __sg_assert_fail(#e, __FILE__, __LINE__, __func__))
#endif
#endif
/* Device printf: captured per launch by the runtime (EmulatorBackend.take_output). */
#define printf(...) __sg_printf(__VA_ARGS__)
namespace std {
using ::__sg_printf;
}
#define __trap() __sg_trap(__FILE__, __LINE__, __func__)
#define __brkpt() __sg_trap(__FILE__, __LINE__, __func__)

/* ---- barriers, memory fences and timing (call sites recorded for diagnostics) ------------- */
#define __SG_SITE const char *__sg_f = __builtin_FILE(), int __sg_l = __builtin_LINE()
static inline void __syncthreads(__SG_SITE) { __sg_barrier(0, 1, __sg_f, __sg_l); }
static inline int __syncthreads_count(int p, __SG_SITE) { return __sg_barrier(1, p, __sg_f, __sg_l); }
static inline int __syncthreads_and(int p, __SG_SITE) { return __sg_barrier(2, p, __sg_f, __sg_l); }
static inline int __syncthreads_or(int p, __SG_SITE) { return __sg_barrier(3, p, __sg_f, __sg_l); }
/* Fences and __nanosleep are yield points: a spin-wait on another thread or block makes progress. */
static inline void __threadfence(__SG_SITE) { __sg_yield_at(__SG_Y_FENCE, __sg_f, __sg_l); }
/* Their scope (PTX ISA, "Memory Consistency Model": fence.sc.cta / .gpu / .sys) goes to the runtime. */
static inline void __threadfence_block(__SG_SITE) { __sg_yield_at(__SG_Y_FENCE_BLOCK, __sg_f, __sg_l); }
static inline void __threadfence_system(__SG_SITE) { __sg_yield_at(__SG_Y_FENCE_SYS, __sg_f, __sg_l); }
static inline void __nanosleep(unsigned int, __SG_SITE) { __sg_yield_at(__SG_Y_SLEEP, __sg_f, __sg_l); }
/* ---- the virtual clock (docs/emulator.md, "Clocks"): clock64(), clock(), and %globaltimer through
   __sg_clock64. Not the host's time: the calling thread's own count of the memory accesses the runtime
   saw (memory/access.h and checks/access.cpp tick sg_abi.h's vclock once per access, checked or not) plus one per clock read,
   from 0 at its block's start. So a kernel reads the same values in a checked run and in the run whose
   output is graded, in any thread order, and cannot time the checks (docs/security.md). ---- */
static inline long long __sg_clock64(void) {
    __sg_ThreadCtx *c = (__sg_ThreadCtx *)__sg_self();
    c->vclock_read = 1;
    return (long long)++c->vclock;
}
/* CUDA's clock(): the low 32 bits of the counter, as a clock_t (never negative here). */
static inline clock_t __sg_clock32(void) { return (clock_t)(unsigned int)__sg_clock64(); }
#define clock64() __sg_clock64()
#define clock() __sg_clock32()
/* PTX's %globaltimer (ns), which the inline PTX `mov.u64 %0, %%globaltimer;` reads (ptx.py). */
static inline unsigned long long __sg_globaltimer(void) { return (unsigned long long)__sg_clock64(); }

/* ---- atomics: one runtime call each (a yield point; sequentially consistent; old value) ---- */
template <class T>
static inline T __sg_atom(int op, T *address, T a, T b, const char *file, int line) {
    static_assert(sizeof(T) <= 8, "atomic operand too large");
    unsigned long long ua = 0, ub = 0;
    memcpy(&ua, &a, sizeof(T));
    memcpy(&ub, &b, sizeof(T));
    int flags = (std::is_floating_point<T>::value ? __SG_A_FLOAT : 0) | (std::is_signed<T>::value ? __SG_A_SIGNED : 0);
    unsigned long long r = __sg_atomic(op | flags, (void *)address, (int)sizeof(T), ua, ub, file, line);
    T out;
    memcpy(&out, &r, sizeof(T));
    return out;
}
/* Each atomicOp also as atomicOp_block and atomicOp_system (CUDA C++ Programming Guide, "Atomic
 * Functions"): the scope (.cta, .sys; else .gpu) goes to the runtime in the op's flags. */
#define __SG_ATOMIC_OP1(name, op, T) \
    static inline T name(T *address, T val, __SG_SITE) { return __sg_atom<T>(op, address, val, (T)0, __sg_f, __sg_l); }
#define __SG_ATOMIC_CAS1(name, op, T)                                                              \
    static inline T name(T *address, T compare, T val, __SG_SITE) {                                \
        return __sg_atom<T>(op, address, compare, val, __sg_f, __sg_l);                            \
    }
#define __SG_SCOPED(def, name, op, T) \
    def(name, op, T) def(name##_block, (op) | __SG_A_SCOPE_BLOCK, T) def(name##_system, (op) | __SG_A_SCOPE_SYS, T)
#define __SG_ATOMIC_OP(name, op, T) __SG_SCOPED(__SG_ATOMIC_OP1, name, op, T)
#define __SG_ATOMIC_INT_FAMILY(T)                                                                  \
    __SG_ATOMIC_OP(atomicAdd, __SG_A_ADD, T)                                                       \
    __SG_ATOMIC_OP(atomicAnd, __SG_A_AND, T)                                                       \
    __SG_ATOMIC_OP(atomicOr, __SG_A_OR, T)                                                         \
    __SG_ATOMIC_OP(atomicXor, __SG_A_XOR, T)                                                       \
    __SG_ATOMIC_OP(atomicExch, __SG_A_EXCH, T)                                                     \
    __SG_ATOMIC_OP(atomicMin, __SG_A_MIN, T)                                                       \
    __SG_ATOMIC_OP(atomicMax, __SG_A_MAX, T)                                                       \
    __SG_SCOPED(__SG_ATOMIC_CAS1, atomicCAS, __SG_A_CAS, T)

__SG_ATOMIC_INT_FAMILY(int)
__SG_ATOMIC_INT_FAMILY(unsigned int)
__SG_ATOMIC_INT_FAMILY(unsigned long long)
__SG_ATOMIC_INT_FAMILY(long long)
#undef __SG_ATOMIC_INT_FAMILY

__SG_ATOMIC_OP(atomicSub, __SG_A_SUB, int)
__SG_ATOMIC_OP(atomicSub, __SG_A_SUB, unsigned int)
__SG_ATOMIC_OP(atomicInc, __SG_A_INC, unsigned int)
__SG_ATOMIC_OP(atomicDec, __SG_A_DEC, unsigned int)
__SG_ATOMIC_OP(atomicAdd, __SG_A_ADD, float)
__SG_ATOMIC_OP(atomicAdd, __SG_A_ADD, double)
__SG_ATOMIC_OP(atomicExch, __SG_A_EXCH, float)
__SG_SCOPED(__SG_ATOMIC_CAS1, atomicCAS, __SG_A_CAS, unsigned short)
#undef __SG_ATOMIC_OP
#undef __SG_ATOMIC_OP1
#undef __SG_ATOMIC_CAS1
#undef __SG_SCOPED


/* ---- min / max: CUDA's overloads (same-type exact matches, mixed types -> common type) ---- */
#define __SG_MINMAX(T)                                                                             \
    static inline constexpr T min(T a, T b) { return b < a ? b : a; }                             \
    static inline constexpr T max(T a, T b) { return a < b ? b : a; }
__SG_MINMAX(int)
__SG_MINMAX(unsigned int)
__SG_MINMAX(long)
__SG_MINMAX(unsigned long)
__SG_MINMAX(long long)
__SG_MINMAX(unsigned long long)
__SG_MINMAX(short)
__SG_MINMAX(unsigned short)
__SG_MINMAX(char)
__SG_MINMAX(signed char)
__SG_MINMAX(unsigned char)
#undef __SG_MINMAX
static inline float min(float a, float b) { return fminf(a, b); }
static inline float max(float a, float b) { return fmaxf(a, b); }
static inline double min(double a, double b) { return fmin(a, b); }
static inline double max(double a, double b) { return fmax(a, b); }
template <class A, class B,
          class = typename std::enable_if<!std::is_same<A, B>::value && std::is_arithmetic<A>::value &&
                                          std::is_arithmetic<B>::value>::type>
static inline constexpr typename std::common_type<A, B>::type min(A a, B b) {
    typedef typename std::common_type<A, B>::type C;
    return (C)b < (C)a ? (C)b : (C)a;
}
template <class A, class B,
          class = typename std::enable_if<!std::is_same<A, B>::value && std::is_arithmetic<A>::value &&
                                          std::is_arithmetic<B>::value>::type>
static inline constexpr typename std::common_type<A, B>::type max(A a, B b) {
    typedef typename std::common_type<A, B>::type C;
    return (C)a < (C)b ? (C)b : (C)a;
}

/* ---- integer and float intrinsics --------------------------------------------------------- */
static inline int __popc(unsigned int x) { return __builtin_popcount(x); }
static inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
static inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz((unsigned int)x); }
static inline int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll((unsigned long long)x); }
static inline int __ffs(int x) { return __builtin_ffs(x); }
static inline int __ffsll(long long x) { return __builtin_ffsll(x); }
static inline unsigned int __brev(unsigned int x) {
    x = ((x >> 1) & 0x55555555u) | ((x & 0x55555555u) << 1);
    x = ((x >> 2) & 0x33333333u) | ((x & 0x33333333u) << 2);
    x = ((x >> 4) & 0x0F0F0F0Fu) | ((x & 0x0F0F0F0Fu) << 4);
    return __builtin_bswap32(x);
}
static inline int __mul24(int a, int b) { return (int)((long long)(a << 8 >> 8) * (b << 8 >> 8)); }
static inline unsigned int __umul24(unsigned int a, unsigned int b) { return (a & 0xFFFFFFu) * (b & 0xFFFFFFu); }
static inline int __mulhi(int a, int b) { return (int)(((long long)a * b) >> 32); }
static inline unsigned int __umulhi(unsigned int a, unsigned int b) {
    return (unsigned int)(((unsigned long long)a * b) >> 32);
}
static inline long long __mul64hi(long long a, long long b) { return (long long)(((__int128)a * b) >> 64); }
static inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b) {
    return (unsigned long long)(((unsigned __int128)a * b) >> 64);
}
static inline int __float_as_int(float f) { int i; memcpy(&i, &f, sizeof i); return i; }
static inline unsigned int __float_as_uint(float f) { unsigned int i; memcpy(&i, &f, sizeof i); return i; }
static inline float __int_as_float(int i) { float f; memcpy(&f, &i, sizeof f); return f; }
static inline float __uint_as_float(unsigned int i) { float f; memcpy(&f, &i, sizeof f); return f; }
static inline float __fdividef(float a, float b) { return a / b; }
static inline float __saturatef(float x) { return x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x); }
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
static inline double rsqrt(double x) { return 1.0 / sqrt(x); }
/* glibc declares (but does not export) these names: map them to the standard functions. */
#define __expf(x) expf(x)
#define __exp10f(x) exp10f(x)
#define __logf(x) logf(x)
#define __log2f(x) log2f(x)
#define __log10f(x) log10f(x)
#define __sinf(x) sinf(x)
#define __cosf(x) cosf(x)
#define __tanf(x) tanf(x)
#define __powf(a, b) powf(a, b)
template <class T>
static inline T __ldg(const T *p) { return *p; }
template <class T>
static inline T __ldcg(const T *p) { return *p; }
template <class T>
static inline T __ldca(const T *p) { return *p; }
template <class T>
static inline T __ldcs(const T *p) { return *p; }

/* ---- warp-level primitives: a rendezvous of the lanes named in the mask ------------------- */
template <class T>
static inline unsigned long long __sg_bits(T v) {
    static_assert(sizeof(T) <= 8 && std::is_trivially_copyable<T>::value,
                  "not supported by the emulator: a warp shuffle of a type larger than 8 bytes");
    unsigned long long u = 0;
    memcpy(&u, &v, sizeof(T));
    return u;
}
template <class T>
static inline T __sg_from_bits(unsigned long long u) {
    T v;
    memcpy(&v, &u, sizeof(T));
    return v;
}
template <class T>
static inline T __shfl_sync(unsigned mask, T var, int srcLane, int width = 32, __SG_SITE) {
    return __sg_from_bits<T>(__sg_warp_op(__SG_W_IDX, mask, __sg_bits(var), srcLane, width, __sg_f, __sg_l));
}
template <class T>
static inline T __shfl_up_sync(unsigned mask, T var, unsigned int delta, int width = 32, __SG_SITE) {
    return __sg_from_bits<T>(__sg_warp_op(__SG_W_UP, mask, __sg_bits(var), (int)delta, width, __sg_f, __sg_l));
}
template <class T>
static inline T __shfl_down_sync(unsigned mask, T var, unsigned int delta, int width = 32, __SG_SITE) {
    return __sg_from_bits<T>(__sg_warp_op(__SG_W_DOWN, mask, __sg_bits(var), (int)delta, width, __sg_f, __sg_l));
}
template <class T>
static inline T __shfl_xor_sync(unsigned mask, T var, int laneMask, int width = 32, __SG_SITE) {
    return __sg_from_bits<T>(__sg_warp_op(__SG_W_XOR, mask, __sg_bits(var), laneMask, width, __sg_f, __sg_l));
}
static inline void __syncwarp(unsigned mask = 0xffffffffu, __SG_SITE) {
    __sg_warp_op(__SG_W_SYNC, mask, 0, 0, 32, __sg_f, __sg_l);
}
static inline unsigned __ballot_sync(unsigned mask, int pred, __SG_SITE) {
    return (unsigned)__sg_warp_op(__SG_W_BALLOT, mask, pred != 0, 0, 32, __sg_f, __sg_l);
}
static inline int __any_sync(unsigned mask, int pred, __SG_SITE) {
    return (int)__sg_warp_op(__SG_W_ANY, mask, pred != 0, 0, 32, __sg_f, __sg_l);
}
static inline int __all_sync(unsigned mask, int pred, __SG_SITE) {
    return (int)__sg_warp_op(__SG_W_ALL, mask, pred != 0, 0, 32, __sg_f, __sg_l);
}
static inline unsigned __reduce_add_sync(unsigned mask, unsigned v, __SG_SITE) {
    return (unsigned)__sg_warp_op(__SG_W_RADD, mask, v, 0, 32, __sg_f, __sg_l);
}
static inline int __reduce_add_sync(unsigned mask, int v, __SG_SITE) {
    return (int)__sg_warp_op(__SG_W_RADD, mask, (unsigned)v, 0, 32, __sg_f, __sg_l);
}
static inline unsigned __reduce_min_sync(unsigned mask, unsigned v, __SG_SITE) {
    return (unsigned)__sg_warp_op(__SG_W_RMIN, mask, v, 0, 32, __sg_f, __sg_l);
}
static inline int __reduce_min_sync(unsigned mask, int v, __SG_SITE) {
    return (int)__sg_warp_op(__SG_W_RMIN, mask, (unsigned)v, 1, 32, __sg_f, __sg_l);
}
static inline unsigned __reduce_max_sync(unsigned mask, unsigned v, __SG_SITE) {
    return (unsigned)__sg_warp_op(__SG_W_RMAX, mask, v, 0, 32, __sg_f, __sg_l);
}
static inline int __reduce_max_sync(unsigned mask, int v, __SG_SITE) {
    return (int)__sg_warp_op(__SG_W_RMAX, mask, (unsigned)v, 1, 32, __sg_f, __sg_l);
}
template <class T>
static inline unsigned __match_any_sync(unsigned mask, T value, __SG_SITE) {
    return (unsigned)__sg_warp_op(__SG_W_MATCH_ANY, mask, __sg_bits(value), 0, 32, __sg_f, __sg_l);
}
template <class T>
static inline unsigned __match_all_sync(unsigned mask, T value, int *pred, __SG_SITE) {
    unsigned r = (unsigned)__sg_warp_op(__SG_W_MATCH_ALL, mask, __sg_bits(value), 0, 32, __sg_f, __sg_l);
    *pred = r != 0;
    return r;
}
static inline unsigned __reduce_and_sync(unsigned mask, unsigned v, __SG_SITE) {
    return (unsigned)__sg_warp_op(__SG_W_RAND, mask, v, 0, 32, __sg_f, __sg_l);
}
static inline unsigned __reduce_or_sync(unsigned mask, unsigned v, __SG_SITE) {
    return (unsigned)__sg_warp_op(__SG_W_ROR, mask, v, 0, 32, __sg_f, __sg_l);
}
static inline unsigned __reduce_xor_sync(unsigned mask, unsigned v, __SG_SITE) {
    return (unsigned)__sg_warp_op(__SG_W_RXOR, mask, v, 0, 32, __sg_f, __sg_l);
}
/* The lanes of the caller's warp that execute this call together (independent thread scheduling:
   docs/emulator.md, "Warp-level primitives"). The source rewrite passes the call's place among the
   file's __activemask() calls and its innermost block (rewrite/rewriter.py, _close_am_block); a call it could not
   place (inside a macro) keeps the defaults. */
static inline unsigned __activemask(int __sg_o = -1, int __sg_a = -1, int __sg_b = -1, int __sg_lp = 0, __SG_SITE) {
    return __sg_activemask(__sg_o, __sg_a, __sg_b, __sg_lp, __sg_f, __sg_l);
}
/* A feature the emulator lacks, at run time (include/cooperative_groups.h uses it: the runtime's
   own names are poisoned for the files included after the prelude). */
#define __SG_UNSUPPORTED(what, file, line) __sg_unsupported(what, file, line)
/* Pre-Volta intrinsics without a mask were removed in CUDA 9 for Volta and later GPUs. */
#define __SG_LEGACY(name) __sg_unsupported(name " (deprecated: use the _sync variant with a mask)", __FILE__, __LINE__)
#define __shfl(var, ...) (__SG_LEGACY("__shfl"), (var))
#define __shfl_up(var, ...) (__SG_LEGACY("__shfl_up"), (var))
#define __shfl_down(var, ...) (__SG_LEGACY("__shfl_down"), (var))
#define __shfl_xor(var, ...) (__SG_LEGACY("__shfl_xor"), (var))
#define __ballot(...) (__SG_LEGACY("__ballot"), 0u)
#define __any(...) (__SG_LEGACY("__any"), 0)
#define __all(...) (__SG_LEGACY("__all"), 0)

/* ---- vector types (uint3 and dim3 come from sg_abi.h) -------------------------------------- */
#define __SG_VEC_ALIGN(T, n) __attribute__((aligned(sizeof(T) * (n) > 16 ? 16 : sizeof(T) * (n))))
#define __SG_VECTORS(T, N)                                                                         \
    struct N##1 { T x; };                                                                          \
    struct __SG_VEC_ALIGN(T, 2) N##2 { T x, y; };                                                  \
    struct __SG_VEC_ALIGN(T, 4) N##4 { T x, y, z, w; };                                            \
    static inline N##1 make_##N##1(T x) { return N##1{x}; }                                        \
    static inline N##2 make_##N##2(T x, T y) { return N##2{x, y}; }                                \
    static inline N##4 make_##N##4(T x, T y, T z, T w) { return N##4{x, y, z, w}; }
#define __SG_VEC3(T, N)                                                                            \
    struct N##3 { T x, y, z; };                                                                    \
    static inline N##3 make_##N##3(T x, T y, T z) { return N##3{x, y, z}; }
__SG_VECTORS(signed char, char)
__SG_VEC3(signed char, char)
__SG_VECTORS(unsigned char, uchar)
__SG_VEC3(unsigned char, uchar)
__SG_VECTORS(short, short)
__SG_VEC3(short, short)
__SG_VECTORS(unsigned short, ushort)
__SG_VEC3(unsigned short, ushort)
__SG_VECTORS(int, int)
__SG_VEC3(int, int)
__SG_VECTORS(unsigned int, uint)
static inline uint3 make_uint3(unsigned int x, unsigned int y, unsigned int z) { return uint3{x, y, z}; }
__SG_VECTORS(long, long)
__SG_VEC3(long, long)
__SG_VECTORS(unsigned long, ulong)
__SG_VEC3(unsigned long, ulong)
__SG_VECTORS(long long, longlong)
__SG_VEC3(long long, longlong)
__SG_VECTORS(unsigned long long, ulonglong)
__SG_VEC3(unsigned long long, ulonglong)
__SG_VECTORS(float, float)
__SG_VEC3(float, float)
__SG_VECTORS(double, double)
__SG_VEC3(double, double)
#undef __SG_VECTORS
#undef __SG_VEC3
#undef __SG_VEC_ALIGN

/* ---- shifts: as PTX computes them (the rewrite wraps every shift's left operand) ------------ */
/* `a >> b` arrives as `__sg_sh(a, "f.cu", line, flags) >> b`, `x <<= n` as `__sg_sha(x, ...) <<= n`
 * (rewrite/shifts.py, find_shifts). An amount of the (promoted) left operand's width or more, or a
 * negative one, is undefined in C++; PTX shl/shr clamp it: 0, or -1 for a negative value shifted
 * right. That is the value given here, and the runtime reports it (kind shift-clamped, not fatal).
 * flags (the rewrite's): 2 / 4: the amount has a `+` / `-` outside brackets; 8: a compound
 * assignment; __sg_shift_do adds 1: a right shift, 16: a signed amount. Operands that are not
 * integers (streams...) get the built-in or overloaded operator, untouched; a __sg_sh left standing
 * inside a wider expression (a macro's operand continued where it is used) converts to its value. */
template <class T>
struct __sg_shift_int
    : std::integral_constant<bool, std::is_integral<T>::value ||
                                       (std::is_enum<T>::value && std::is_convertible<T, long long>::value)> {};
template <class R, class S>
static inline __attribute__((always_inline)) constexpr R __sg_shift_do(R v, S s, bool left, const char *file,
                                                                        int line, int flags, int use,
                                                                        const char *macro) {
    constexpr unsigned bits = sizeof(R) * CHAR_BIT;
    if (!(std::is_signed<S>::value && s < S(0)) && (unsigned long long)s < bits) return left ? R(v << s) : R(v >> s);
    R r = (!left && std::is_signed<R>::value && v < R(0)) ? R(-1) : R(0);
    __sg_shift_clamped(file, line, flags | (left ? 0 : 1) | (std::is_signed<S>::value ? 16 : 0), use, macro,
                       (unsigned long long)s, (int)bits, (int)r);
    return r;
}
/* The left operand of a shift, promoted. */
template <class R>
struct __sg_shift_lhs {
    R v;
    const char *file;
    int line, flags, use;
    const char *macro;
    constexpr operator R() const { return v; }
    template <class B, class = typename std::enable_if<__sg_shift_int<B>::value>::type>
    friend inline __attribute__((always_inline)) constexpr R operator<<(__sg_shift_lhs p, B b) {
        return __sg_shift_do(p.v, +b, true, p.file, p.line, p.flags, p.use, p.macro);
    }
    template <class B, class = typename std::enable_if<__sg_shift_int<B>::value>::type>
    friend inline __attribute__((always_inline)) constexpr R operator>>(__sg_shift_lhs p, B b) {
        return __sg_shift_do(p.v, +b, false, p.file, p.line, p.flags, p.use, p.macro);
    }
    template <class B, class = typename std::enable_if<!__sg_shift_int<typename std::decay<B>::type>::value>::type>
    friend constexpr auto operator<<(__sg_shift_lhs p, B &&b) -> decltype(p.v << static_cast<B &&>(b)) {
        return p.v << static_cast<B &&>(b);
    }
    template <class B, class = typename std::enable_if<!__sg_shift_int<typename std::decay<B>::type>::value>::type>
    friend constexpr auto operator>>(__sg_shift_lhs p, B &&b) -> decltype(p.v >> static_cast<B &&>(b)) {
        return p.v >> static_cast<B &&>(b);
    }
};
/* The left operand of a compound shift (an integer lvalue). */
template <class A>
struct __sg_shift_ref {
    A *p;
    const char *file;
    int line, flags, use;
    const char *macro;
    template <class B, class = typename std::enable_if<__sg_shift_int<B>::value>::type>
    friend inline __attribute__((always_inline)) constexpr A &operator<<=(__sg_shift_ref r, B b) {
        typedef typename std::remove_cv<A>::type T;
        *r.p = static_cast<T>(__sg_shift_do(+*r.p, +b, true, r.file, r.line, r.flags, r.use, r.macro));
        return *r.p;
    }
    template <class B, class = typename std::enable_if<__sg_shift_int<B>::value>::type>
    friend inline __attribute__((always_inline)) constexpr A &operator>>=(__sg_shift_ref r, B b) {
        typedef typename std::remove_cv<A>::type T;
        *r.p = static_cast<T>(__sg_shift_do(+*r.p, +b, false, r.file, r.line, r.flags, r.use, r.macro));
        return *r.p;
    }
    template <class B, class = typename std::enable_if<!__sg_shift_int<typename std::decay<B>::type>::value>::type>
    friend constexpr auto operator<<=(__sg_shift_ref r, B &&b) -> decltype(*r.p <<= static_cast<B &&>(b)) {
        return *r.p <<= static_cast<B &&>(b);
    }
    template <class B, class = typename std::enable_if<!__sg_shift_int<typename std::decay<B>::type>::value>::type>
    friend constexpr auto operator>>=(__sg_shift_ref r, B &&b) -> decltype(*r.p >>= static_cast<B &&>(b)) {
        return *r.p >>= static_cast<B &&>(b);
    }
};
template <class A, class = typename std::enable_if<__sg_shift_int<A>::value>::type>
static inline __attribute__((always_inline)) constexpr __sg_shift_lhs<decltype(+A())>
__sg_sh(A a, const char *file, int line, int flags, int use = 0, const char *macro = nullptr) {
    return __sg_shift_lhs<decltype(+A())>{+a, file, line, flags, use, macro};
}
template <class A, class = typename std::enable_if<!__sg_shift_int<typename std::decay<A>::type>::value>::type>
static inline constexpr A &&__sg_sh(A &&a, const char *, int, int, int = 0, const char * = nullptr) noexcept {
    return static_cast<A &&>(a);
}
template <class A, class = typename std::enable_if<std::is_integral<typename std::remove_cv<A>::type>::value &&
                                                   !std::is_const<A>::value>::type>
static inline __attribute__((always_inline)) constexpr __sg_shift_ref<A>
__sg_sha(A &a, const char *file, int line, int flags, int use = 0, const char *macro = nullptr) {
    return __sg_shift_ref<A>{&a, file, line, flags, use, macro};
}
template <class A, class = typename std::enable_if<!std::is_integral<typename std::remove_cv<
                       typename std::remove_reference<A>::type>::type>::value ||
                       std::is_const<typename std::remove_reference<A>::type>::value>::type>
static inline constexpr A &&__sg_sha(A &&a, const char *, int, int, int = 0, const char * = nullptr) noexcept {
    return static_cast<A &&>(a);
}

/* ---- used by the rewrite and the kernel registration the backend appends ------------------- */
static inline constexpr size_t __sg_align(size_t natural, size_t requested) {
    return requested > natural ? requested : natural;
}

template <class... A>
struct __sg_kernel_invoker {
    template <size_t... I>
    __attribute__((no_sanitize("thread"))) static void call(void (*f)(A...), void *const *args, std::index_sequence<I...>) {
        f(*static_cast<typename std::remove_reference<A>::type *>(args[I])...);
    }
    __attribute__((no_sanitize("thread"))) static void invoke(void *fn, void *const *args) {
        call(reinterpret_cast<void (*)(A...)>(fn), args, std::index_sequence_for<A...>{});
    }
};

template <class... A>
static inline int __sg_register(const char *name, void (*f)(A...)) {
    return __sg_register_kernel(name, reinterpret_cast<void *>(f), &__sg_kernel_invoker<A...>::invoke,
                                (int)sizeof...(A));
}

/* ---- shared-window addresses, and the inline PTX of Hopper's bulk copy ---------------------- */
/* A shared-memory address of PTX's .shared window is 32 bits: here, the offset from the block's
 * dynamic shared memory (two's complement), so a generic pointer and its shared address convert
 * both ways within the block's arena. */
static inline size_t __cvta_generic_to_shared(const void *p) {
    return (size_t)(unsigned int)((const char *)p - (const char *)__sg_dyn_shared(nullptr, 0));
}
static inline void *__cvta_shared_to_generic(size_t a) {
    return (char *)__sg_dyn_shared(nullptr, 0) + (int)(unsigned int)a;
}
/* The inline PTX the rewrite recognises (rewrite/asm.py and ptx.py, ptx_statement: the bulk copy and its mbarrier,
 * as the Part 5 reference uses them on sm_90) becomes calls of these. An mbarrier is one 64-bit word
 * of shared memory, read and changed by atomic operations: arrivals pending (bits 0-15), arrivals
 * expected (bits 16-31), the transaction bytes pending (bits 32-62, signed) and the phase's parity
 * (bit 63). A phase completes when no arrival and no byte is pending: the parity flips and the
 * arrivals are expected again. The bulk copy is done when it is issued, by the issuing thread
 * (its loads and stores checked as that thread's), and completes its bytes on the mbarrier. */
#define __SG_MB_PENDING(w) ((unsigned)((w) & 0xffffu))
#define __SG_MB_EXPECTED(w) ((unsigned)(((w) >> 16) & 0xffffu))
#define __SG_MB_TX(w) ((long long)((unsigned long long)(w) << 1) >> 33)
#define __SG_MB_PHASE(w) ((unsigned)((unsigned long long)(w) >> 63))
static inline unsigned long long __sg_mb_word(unsigned pending, unsigned expected, long long tx, unsigned phase) {
    if (pending == 0 && tx == 0) pending = expected, phase ^= 1u;  /* the phase completes */
    return (unsigned long long)(pending & 0xffffu) | ((unsigned long long)(expected & 0xffffu) << 16) |
           (((unsigned long long)tx & 0x7fffffffull) << 32) | ((unsigned long long)(phase & 1u) << 63);
}
static inline unsigned long long *__sg_mb(unsigned long long bar) {
    return (unsigned long long *)__cvta_shared_to_generic((size_t)bar);
}
/* One change of the word, atomically: arrivals and transaction bytes taken off (added: negative). */
static inline unsigned long long __sg_mb_change(unsigned long long bar, unsigned arrivals, long long tx,
                                                const char *f, int l) {
    unsigned long long *p = __sg_mb(bar), old = __sg_atom<unsigned long long>(__SG_A_LOAD, p, 0ull, 0ull, f, l);
    for (;;) {
        unsigned long long nw = __sg_mb_word(__SG_MB_PENDING(old) - arrivals, __SG_MB_EXPECTED(old), __SG_MB_TX(old) - tx,
                                             __SG_MB_PHASE(old));
        unsigned long long seen = __sg_atom<unsigned long long>(__SG_A_CAS, p, old, nw, f, l);
        if (seen == old) return old;
        old = seen;
    }
}
/* init and inval are plain stores, as in PTX: other threads' operations on the mbarrier must follow
 * them through a barrier (the checks see a race otherwise). */
static inline void __sg_ptx_mbarrier_init(unsigned long long bar, unsigned long long count) {
    *__sg_mb(bar) = (count & 0xffffu) | ((count & 0xffffu) << 16);
}
static inline void __sg_ptx_mbarrier_inval(unsigned long long bar) { *__sg_mb(bar) = 0; }
/* mbarrier.arrive[.expect_tx]: the state before (its phase is what mbarrier.test_wait takes). */
static inline unsigned long long __sg_ptx_mbarrier_arrive(unsigned long long bar, unsigned long long count,
                                                          unsigned long long tx, __SG_SITE) {
    return __sg_mb_change(bar, (unsigned)count, -(long long)tx, __sg_f, __sg_l);
}
static inline void __sg_ptx_complete_tx(unsigned long long bar, unsigned long long bytes, __SG_SITE) {
    __sg_mb_change(bar, 0, (long long)bytes, __sg_f, __sg_l);
}
/* The bulk copy's loop is one step of the issuing thread in the profile (memory/hooks.cpp). */
static inline unsigned long long __sg_ptx_steps_mark(void) { return __sg_steps_mark(); }
static inline void __sg_ptx_steps_one_since(unsigned long long mark) { __sg_steps_one_since(mark); }
/* mbarrier.try_wait.parity / test_wait.parity: 1 once the phase of that parity is complete; a
 * thread that polls yields (a spin-wait makes progress, and one on a phase that never completes is a
 * deadlock). */
static inline unsigned __sg_ptx_mbarrier_wait_parity(unsigned long long bar, unsigned long long parity, __SG_SITE) {
    unsigned long long w = __sg_atom<unsigned long long>(__SG_A_LOAD, __sg_mb(bar), 0ull, 0ull, __sg_f, __sg_l);
    if (__SG_MB_PHASE(w) != (unsigned)(parity & 1u)) return 1u;
    __sg_yield_at(__SG_Y_SLEEP, __sg_f, __sg_l);
    return 0u;
}
/* The bulk copy's unit: 16 bytes (its addresses and size are multiples of 16). */
struct __align__(16) __sg_ptx_chunk {
    unsigned long long lo, hi;
};
/* fence.proxy.async, cp.async.bulk.prefetch: nothing to wait for here; a fence is a yield point. */
static inline void __sg_ptx_fence(__SG_SITE) { __sg_yield_at(__SG_Y_FENCE, __sg_f, __sg_l); }

/* ---- inline PTX of the memory model (ptx.py): ld, st, atom, red, fences, special registers ------ */
/* A PTX register is its bits in an unsigned long long: an integer operand extended (a signed one by
 * its sign), a float's bits, a pointer's address. `ld`/`st`/`atom` of a PTX type T work on the
 * unsigned integer of T's size (the __atomic builtins take integers), so -fsanitize=thread makes each
 * ordered one a __tsan_atomic* hook call that carries its memory order; __sg_scope gives the runtime
 * the operation's scope just before it (PTX ISA, "Memory Consistency Model": .relaxed / .acquire /
 * .release / .acq_rel at .cta / .gpu / .sys). Orders: GCC's __ATOMIC_*, or these two for the
 * instructions that are no atomic: a weak (plain) access and a .volatile one. */
#define __SG_PTX_WEAK (-1)
#define __SG_PTX_VOLATILE (-2)
template <size_t N> struct __sg_ptx_uint;
template <> struct __sg_ptx_uint<1> { typedef uint8_t __attribute__((may_alias)) type; };
template <> struct __sg_ptx_uint<2> { typedef uint16_t __attribute__((may_alias)) type; };
template <> struct __sg_ptx_uint<4> { typedef uint32_t __attribute__((may_alias)) type; };
template <> struct __sg_ptx_uint<8> { typedef uint64_t __attribute__((may_alias)) type; };
/* A C++ operand's value as a register ("r", "l", "h", "f", "d" operands; a value an instruction read). */
template <class T>
static inline __attribute__((always_inline)) unsigned long long __sg_ptx_reg(T v) {
    if constexpr (std::is_floating_point<T>::value)
        return (unsigned long long)__builtin_bit_cast(typename __sg_ptx_uint<sizeof(T)>::type, v);
    else if constexpr (std::is_pointer<T>::value)
        return (unsigned long long)(uintptr_t)v;
    else
        return (unsigned long long)v;
}
/* A register written into an output operand of C++ type T (a float: its low bits reinterpreted). */
template <class T>
static inline __attribute__((always_inline)) void __sg_ptx_out(T &dst, unsigned long long r) {
    typedef typename std::remove_cv<T>::type V;
    if constexpr (std::is_floating_point<V>::value)
        dst = __builtin_bit_cast(V, (typename __sg_ptx_uint<sizeof(V)>::type)r);
    else if constexpr (std::is_pointer<V>::value)
        dst = (V)(uintptr_t)r;
    else
        dst = (V)r;
}
/* The address of an operand of a state space: .shared holds a 32-bit shared-window address. */
static inline __attribute__((always_inline)) unsigned long long __sg_ptx_shared(unsigned long long a) {
    return (unsigned long long)(uintptr_t)__cvta_shared_to_generic((size_t)a);
}
/* ld{.sem}{.scope}.T: the value read, as a register. */
template <class T, int MO, int SCOPE>
static inline __attribute__((always_inline)) unsigned long long __sg_ptx_ld(unsigned long long a) {
    typedef typename __sg_ptx_uint<sizeof(T)>::type U;
    U *p = (U *)(uintptr_t)a, u;
    if constexpr (MO == __SG_PTX_WEAK) {
        u = *p;
    } else if constexpr (MO == __SG_PTX_VOLATILE) {
        u = *(volatile U *)p;
    } else {
        __sg_scope(SCOPE);
        u = __atomic_load_n(p, MO);
    }
    return __sg_ptx_reg(__builtin_bit_cast(T, u));
}
/* st{.sem}{.scope}.T [a], r: the register's low bits of T's size. */
template <class T, int MO, int SCOPE>
static inline __attribute__((always_inline)) void __sg_ptx_st(unsigned long long a, unsigned long long r) {
    typedef typename __sg_ptx_uint<sizeof(T)>::type U;
    U *p = (U *)(uintptr_t)a, u = (U)r;
    if constexpr (MO == __SG_PTX_WEAK) {
        *p = u;
    } else if constexpr (MO == __SG_PTX_VOLATILE) {
        *(volatile U *)p = u;
    } else {
        __sg_scope(SCOPE);
        __atomic_store_n(p, u, MO);
    }
}
/* What atom.min / .max / .inc / .dec and a float's atom.add store, from the old value x and the operand y
 * (PTX ISA, "Parallel Synchronization and Communication Instructions: atom"). */
template <class T, int OP, class U>
static inline __attribute__((always_inline)) U __sg_ptx_apply(U old, U operand) {
    T x = __builtin_bit_cast(T, old), y = __builtin_bit_cast(T, operand), r;
    if constexpr (OP == __SG_A_MIN) r = y < x ? y : x;
    else if constexpr (OP == __SG_A_MAX) r = x < y ? y : x;
    else if constexpr (OP == __SG_A_INC) r = x >= y ? T(0) : T(x + 1);
    else if constexpr (OP == __SG_A_DEC) r = (x == T(0) || x > y) ? y : T(x - 1);
    else r = T(x + y);
    return __builtin_bit_cast(U, r);
}
/* atom{.sem}{.scope}.OP.T [a], b(, c) and red (its result unused): the old value, as a register.
 * OP: __SG_A_*. Integer add, and, or, xor, exch and cas are one __atomic builtin each; min, max,
 * inc, dec and a float's add a relaxed load then compare-and-swap until it holds (each a yield point). */
template <class T, int OP, int MO, int SCOPE>
static inline __attribute__((always_inline)) unsigned long long __sg_ptx_atom(unsigned long long a, unsigned long long b,
                                                                             unsigned long long c) {
    typedef typename __sg_ptx_uint<sizeof(T)>::type U;
    constexpr int FAIL = MO == __ATOMIC_RELEASE ? __ATOMIC_RELAXED : MO == __ATOMIC_ACQ_REL ? __ATOMIC_ACQUIRE : MO;
    U *p = (U *)(uintptr_t)a, ub = (U)b, old;
    __sg_scope(SCOPE);
    if constexpr (OP == __SG_A_ADD && !std::is_floating_point<T>::value) {
        old = __atomic_fetch_add(p, ub, MO);
    } else if constexpr (OP == __SG_A_AND) {
        old = __atomic_fetch_and(p, ub, MO);
    } else if constexpr (OP == __SG_A_OR) {
        old = __atomic_fetch_or(p, ub, MO);
    } else if constexpr (OP == __SG_A_XOR) {
        old = __atomic_fetch_xor(p, ub, MO);
    } else if constexpr (OP == __SG_A_EXCH) {
        old = __atomic_exchange_n(p, ub, MO);
    } else if constexpr (OP == __SG_A_CAS) {
        old = ub;
        __atomic_compare_exchange_n(p, &old, (U)c, false, MO, FAIL);
    } else {
        old = __atomic_load_n(p, __ATOMIC_RELAXED);
        for (;;) {
            U nw = __sg_ptx_apply<T, OP>(old, ub);
            __sg_scope(SCOPE);
            if (__atomic_compare_exchange_n(p, &old, nw, false, MO, FAIL)) break;
        }
    }
    return __sg_ptx_reg(__builtin_bit_cast(T, old));
}
/* fence.sc.{cta,gpu,sys} and membar.{cta,gl,sys} (membar is fence.sc since sm_70): the runtime's
 * fence yield point, its scope in the code (the site for a deadlock's message). */
static inline void __sg_ptx_fence_sc(int scope, __SG_SITE) {
    __sg_yield_at(scope == __SG_SCOPE_BLOCK ? __SG_Y_FENCE_BLOCK
                  : scope == __SG_SCOPE_SYSTEM ? __SG_Y_FENCE_SYS : __SG_Y_FENCE, __sg_f, __sg_l);
}
/* fence.acq_rel.{cta,gpu,sys}: __atomic_thread_fence, so the runtime's fence hook
 * (__tsan_atomic_thread_fence) gets the order (acq_rel, not sc), __sg_scope the scope. */
template <int SCOPE>
static inline __attribute__((always_inline)) void __sg_ptx_fence_acq_rel(void) {
    __sg_scope(SCOPE);
    __atomic_thread_fence(__ATOMIC_ACQ_REL);
}
/* Special registers (PTX ISA, "Special Registers"). The thread's linear index in its block: x, then y, then z. */
static inline unsigned __sg_ptx_tid_linear(void) {
    const uint3 t = threadIdx;
    const dim3 d = blockDim;
    return t.x + d.x * (t.y + d.y * t.z);
}
/* %laneid: the lane in the warp (warps are 32 consecutive linear indices). */
static inline unsigned __sg_ptx_laneid(void) { return __sg_ptx_tid_linear() % 32u; }
/* %warpid: here the warp's index in its block. On a GPU %warpid is the warp's slot on its SM when
 * read: it may change while the thread runs (preemption, rescheduling) and is not linear / 32 in
 * general; PTX says to read it only for profiling. */
static inline unsigned __sg_ptx_warpid(void) { return __sg_ptx_tid_linear() / 32u; }
/* %lanemask_eq / _lt / _le / _gt / _ge: the lanes equal to, below, ... the caller's. */
static inline unsigned __sg_ptx_lanemask_eq(void) { return 1u << __sg_ptx_laneid(); }
static inline unsigned __sg_ptx_lanemask_lt(void) { return __sg_ptx_lanemask_eq() - 1u; }
static inline unsigned __sg_ptx_lanemask_le(void) { return __sg_ptx_lanemask_lt() | __sg_ptx_lanemask_eq(); }
static inline unsigned __sg_ptx_lanemask_gt(void) { return ~__sg_ptx_lanemask_le(); }
static inline unsigned __sg_ptx_lanemask_ge(void) { return ~__sg_ptx_lanemask_lt(); }

/* The rewrite's way to the runtime (the shared-memory arena, a jump out of a barrier's reach): its
 * text follows the lockdown header (lockdown.py), which poisons the runtime's own names; a macro
 * defined here still reaches them. Whatever runtime function the rewrite calls needs one. */
#define __sg_shared_at __sg_shared
#define __sg_dyn_shared_at __sg_dyn_shared
#define __sg_jump_at __sg_jump
/* The scope (__SG_SCOPE_*) of the next __atomic builtin or fence: include/cuda/atomic and
 * include/cuda/std/atomic, which a file includes after the lockdown header, call it by this name. */
#define __sg_scope_at __sg_scope

/* The memory-access profile is the runtime's (runtime/profile/profile.h): student code may not switch it
 * off or take its counts. */
#pragma GCC poison sg_profile_set sg_profile_take

/* ---- the checks cannot be switched off ------------------------------------------------ */
/* The rewrite refuses these attributes in the student's text; as empty macros they also vanish
 * where a macro pastes them together (`no_##sanitize_thread`): attribute names are macro-expanded. */
#define no_sanitize(...)
#define __no_sanitize__(...)
#define no_sanitize_thread
#define __no_sanitize_thread__
#define no_sanitize_undefined
#define __no_sanitize_undefined__
#define disable_sanitizer_instrumentation
#define __disable_sanitizer_instrumentation__
