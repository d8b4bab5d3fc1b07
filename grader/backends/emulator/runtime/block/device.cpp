// The runtime, block level: the device-side entry points of a thread and its block.
#include "block/rounds.h"
#include "checks/findings.h"
#include "memory/access.h"
#include "grid/output.h"
#include "warp/rendezvous.h"

using namespace sg::rt;

// ---------------------------------------------------------------------------------------------
// Device-side entry points (hidden; called by emulated code on a fiber).
// ---------------------------------------------------------------------------------------------
extern "C" {

int __sg_register_kernel(const char *name, void *fn, __sg_invoke_fn invoke, int nargs) {
    if (g_nkernels >= kMaxKernels) return -1;
    g_kernels[g_nkernels] = Kernel{name, fn, invoke, nargs};
    return g_nkernels++;
}

void *__sg_shared(__sg_slot *slot, size_t size, size_t align, size_t elem) {
    Fiber *f = current_fiber();
    Block *B = f->blk;
    unsigned id = __atomic_load_n(&slot->id, __ATOMIC_ACQUIRE);
    if (id == 0) {
        unsigned fresh = g_next_slot_id.fetch_add(1) + 1;
        unsigned expected = 0;
        if (__atomic_compare_exchange_n(&slot->id, &expected, fresh, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
            id = fresh;
        else
            id = expected;
    }
    if (id >= B->slots.size()) B->slots.resize(size_t(id) * 2 + 8);
    SlotState &s = B->slots[id];
    if (s.gen == B->gen) return s.ptr;
    if (align == 0 || (align & (align - 1)) != 0) align = 16;
    size_t off = (B->bump + align - 1) & ~(align - 1);
    size_t limit = B->w->launch->shared_limit;
    if (size > limit || B->used + size > limit || off + size + kRedZone > B->arena_cap) {
        B->w->fail(f, Kind::shared_memory_limit,
                   "the block needs more shared memory than the limit of %zu bytes: __shared__ %s (%s:%d) "
                   "needs %zu bytes, and %zu bytes (%zu of them dynamic) are already in use",
                   limit, slot->name, slot->file, slot->line, size, B->used, size_t(B->w->launch->dyn_shared));
    }
    s.gen = B->gen;
    s.ptr = B->arena + off;
    B->bump = off + size + kRedZone;
    B->used += size;
    B->arrays.push_back(ShArr{off, size, elem ? elem : 1, slot->name});
    fill_shared(B->arena, off, size, B->w->launch->shared_fill);
    std::memset(B->arena + off + size, kPoison, kRedZone);
    return s.ptr;
}

void *__sg_dyn_shared(const char *name, size_t elem) {
    Block *B = current_fiber()->blk;
    ShArr &d = B->arrays[0];
    if (!d.name) d.name = name, d.elem = elem ? elem : 1;
    return B->arena + d.off;
}

int __sg_barrier(int kind, int predicate, const char *file, int line) {
    Fiber *f = current_fiber();
    Block *B = f->blk;
    if (kind == 1) B->acc_count += predicate != 0;
    if (kind == 2) B->acc_and &= predicate != 0;
    if (kind == 3) B->acc_or |= predicate != 0;
    f->site_file = file;
    f->site_line = line;
    f->site_op = -1;
    f->state = kAtBarrier;
    ++B->at_barrier;
    B->progress = true;
    B->w->next_in_round(f);
    return kind == 1 ? B->rel_count : kind == 2 ? B->rel_and : kind == 3 ? B->rel_or : 0;
}

void __sg_yield_at(int what, const char *file, int line) {
    Fiber *f = current_fiber();
    bool is_fence = what == __SG_Y_FENCE || what == __SG_Y_FENCE_BLOCK || what == __SG_Y_FENCE_SYS;
    // __threadfence() is fence.sc.gpu, __threadfence_block() .cta, __threadfence_system() .sys (the
    // CUDA C++ Programming Guide, "Memory Fence Functions"); __nanosleep() orders nothing.
    if (f->blk->checked && is_fence)
        fence(f, what == __SG_Y_FENCE_BLOCK ? __SG_SCOPE_BLOCK : what == __SG_Y_FENCE_SYS ? __SG_SCOPE_SYSTEM
                                                                                          : __SG_SCOPE_DEVICE);
    yield_here(f, is_fence ? "__threadfence()" : "__nanosleep()", file, line, 0, nullptr, 0);
}

// The scope (__SG_SCOPE_*) of the calling thread's next atomic or fence made by a __atomic builtin
// (<cuda/atomic>, inline PTX): the -fsanitize=thread hooks carry the memory order only. Taken, and
// set back to .gpu, by that operation's hook (memory/hooks.cpp).
void __sg_scope(int scope) {
    if (!on_fiber()) return;
    current_fiber()->scope_next = scope;
}

void __sg_jump(int kind, const char *file, int line) {
    if (!on_fiber()) return;  // host code, a static initialiser
    Fiber *f = current_fiber();
    for (unsigned i = 0; i < f->njumps; ++i)
        if (f->jump_line[i] == line && f->jump_file[i] == file) return;
    if (f->njumps == kJumps) return;
    f->jump_file[f->njumps] = file;
    f->jump_line[f->njumps] = line;
    f->jump_kind[f->njumps] = (unsigned char)kind;
    ++f->njumps;
}

void __sg_trap(const char *file, int line, const char *func) {
    Fiber *f = current_fiber();
    current_worker()->fail(f, Kind::trap, "__trap() at %s:%d in %s", file, line, func);
}

void __sg_unsupported(const char *what, const char *file, int line) {
    Fiber *f = current_fiber();
    current_worker()->fail(f, Kind::unsupported, "not supported by the emulator: %s (%s:%d)", what, file, line);
}

void __sg_assert_fail(const char *expr, const char *file, unsigned int line, const char *func) {
    Fiber *f = current_fiber();
    current_worker()->fail(f, Kind::device_assert, "device assertion `%s` failed at %s:%u in %s", expr, file, line, func);
}

#if defined(__GLIBC__)
// glibc's assert() calls this; the definition is hidden, so only this module's code binds to it.
__attribute__((noreturn, visibility("hidden"))) void __assert_fail(const char *expr, const char *file,
                                                                     unsigned int line, const char *func) {
    __sg_assert_fail(expr, file, line, func);
}
#endif

// Device printf (the prelude renames printf): captured, capped, until Python takes it.
int __sg_printf(const char *fmt, ...) {
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    int n = std::vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n > 0) append_output(buf, std::min(size_t(n), sizeof buf - 1));
    return n;
}

}  // extern "C"
