// The runtime, block level: a block's rounds, its threads' entry and failures, yield points.
#include "block/rounds.h"
#include "checks/findings.h"
#include "memory/access.h"
#include "warp/rendezvous.h"
#include "profile/profile.h"

namespace sg::rt {

void Worker::block_error(Block *B, Fiber *f, Kind kind, const std::string &msg) {
    if (B->failed) return;
    B->failed = true;
    ErrorRecord &e = B->error;
    e.set = true;
    e.block_linear = B->linear;
    e.has_ids = f != nullptr;
    e.block = block_ids(launch, B->linear);
    if (f) e.thread = f->hdr->threadIdx;
    e.kind = kind;
    std::snprintf(e.message, sizeof e.message, "%s", msg.c_str());
}

void Worker::fail(Fiber *f, Kind kind, const char *fmt, ...) {
    Block *B = f->blk;
    if (!B->failed) {
        B->failed = true;
        ErrorRecord &e = B->error;
        e.set = true;
        e.block_linear = B->linear;
        e.has_ids = true;
        e.block = f->hdr->blockIdx;
        e.thread = f->hdr->threadIdx;
        e.kind = kind;
        va_list ap;
        va_start(ap, fmt);
        std::vsnprintf(e.message, sizeof e.message, fmt, ap);
        va_end(ap);
    }
    running = nullptr;
    // Leave this thread for good; the scheduler sees `failed` and abandons the block.
    switch_to(&f->cx, &sched);
    __builtin_unreachable();
}

// A fatal finding: recorded, then the thread fails with the finding's message.
[[noreturn]] void fatal_finding(Fiber *f, Finding &fd) {
    Worker *w = f->blk->w;
    add_finding(w, fd);
    w->fail(f, fd.kind, "%s", fd.msg);
}

// Entry point of every emulated thread.
void fiber_main(void *arg) {
    Fiber *f = static_cast<Fiber *>(arg);
    Block *B = f->blk;
    const Kernel *k = B->w->launch->kernel;
    k->invoke(k->fn, B->w->launch->args);
    if (tl_stale.addr) put_back_stale();  // its last access was a load given an older value
    f->state = kDone;
    B->warps[f->linear / 32].exited |= 1u << (f->linear % 32);
    --B->live;
    B->progress = true;
    B->w->next_in_round(f);
    __builtin_unreachable();
}

void Worker::arrange(Block *B, std::vector<unsigned> &v) {
    switch (launch->schedule) {
        case kDescending:
            std::sort(v.begin(), v.end(), [](unsigned a, unsigned b) { return a > b; });
            break;
        case kRandom:
            for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[splitmix(B->rng) % i]);
            break;
        default:
            if (!std::is_sorted(v.begin(), v.end())) std::sort(v.begin(), v.end());  // mostly sorted already
            break;
    }
}

bool Worker::start_block(Block *B, uint64_t b, std::string &why) {
    Launch *L = launch;
    const unsigned n = L->nthreads;
    // Arrays take at most shared_limit bytes; the red zones between them come on top.
    size_t cap = L->shared_limit + 128 * 1024;
    if (!B->ensure_fibers(n, why) || !B->ensure_arena(cap, why)) return false;
    B->w = this;
    B->busy = true;
    B->linear = b;
    B->inst = L->inst_base + uint32_t(b);
    B->n = n;
    const dim3 g = L->grid, bd = L->block;
    uint3 bid = block_ids(L, b);
    ++B->gen;
    std::memset(B->arena, kPoison, kRedZone);  // red zones: poison; unwritten shared memory reads the fill
    fill_shared(B->arena, kRedZone, L->dyn_shared, L->shared_fill);
    std::memset(B->arena + kRedZone + L->dyn_shared, kPoison, kRedZone);
    B->arrays.assign(1, ShArr{kRedZone, L->dyn_shared, 1, nullptr});
    B->bump = (kRedZone + L->dyn_shared + kRedZone + 15) & ~size_t(15);
    B->used = L->dyn_shared;
    B->acc_count = 0, B->acc_and = 1, B->acc_or = 0;
    B->rel_count = 0, B->rel_and = 1, B->rel_or = 0;
    B->live = n;
    B->at_barrier = 0;
    B->progress = B->yielded = B->stale = B->failed = false;
    B->early_exit_noted = false;
    B->lv_on = false;
    B->lw.releases = 0, B->lw.have = false;
    B->wrote = false;
    B->rounds = 0;
    B->error.set = false;
    B->uninit_n = 0;
    B->rng = mix(L->seed, b + 1);
    B->irng = mix(L->seed ^ 0x6a09e667f3bcc909ull, b + 1);
    B->checked = L->checks_block(b);
    B->checks_left = L->sample_mode == 1 ? SG_SAMPLED_BLOCK_CHECKS : 0;
    B->bar_epoch = 1;
    B->last_bar_time = 0;
    B->know.clear();
    std::memset(B->warps, 0, sizeof(Warp) * ((n + 31) / 32));
    B->am_pending = 0;
    for (unsigned t = 0; t < n; ++t) {
        Fiber &f = B->fibers[t];
        f.linear = t;
        f.state = kRunnable;
        f.sig_pos = 0;
        std::memset(f.sigs, 0, sizeof f.sigs);
        f.yround = 0;
        f.wserial = 0;
        f.njumps = 0;
        f.rel_time = f.rel_bar = f.rel_snap = f.lrel = 0;
        f.know.clear();
        f.pend.clear();
        f.vol_addr = 0;
        f.dep = nullptr;
        f.dep_time = 0;
        f.nobs = 0;
        f.scope_next = __SG_SCOPE_DEVICE;
        __sg_ThreadCtx *h = f.hdr;
        h->threadIdx = thread_ids(L, t);
        h->blockIdx = bid;
        h->blockDim = bd;
        h->gridDim = g;
        h->vclock = 0;  // the virtual clock (sg_abi.h) starts at each block's start
        h->vclock_read = 0;
        prepare(&f.cx, f.stack_lo, reinterpret_cast<char *>(h), &fiber_main, &f);
    }
    B->order.clear();
    B->next.clear();
    for (unsigned t = 0; t < n; ++t) B->order.push_back(t);
    if (L->schedule != kAscending) arrange(B, B->order);
    if (B->checked) {
        size_t granules = (B->arena_cap + 3) / 4;
        if (B->sh.size() < granules) {
            B->sh.assign(granules, Cell{});
            B->sh_rel.assign(granules, 0);
            B->init_inst.assign(granules, 0);
            B->init_mask.assign(granules, 0);
        }
    }
    return true;
}

void Worker::run_round(Block *B) {
    B->cursor = 0;
    B->progress = false;
    B->yielded = false;
    B->wrote = false;
    ++B->rounds;
    running = &B->fibers[B->order[0]];
    switch_to(&sched, &running->cx);
    running = nullptr;
}

// The first jump statement (return, break, continue: rewrite/rewriter.py reports them) that thread x took
// since the last barrier it passed and thread y did not; -1 when there is none.
int parting_jump(const Fiber *x, const Fiber *y) {
    for (unsigned i = 0; i < x->njumps; ++i) {
        bool both = false;
        for (unsigned j = 0; j < y->njumps && !both; ++j)
            both = y->jump_line[j] == x->jump_line[i] &&
                   (y->jump_file[j] == x->jump_file[i] || !std::strcmp(y->jump_file[j], x->jump_file[i]));
        if (!both) return int(i);
    }
    return -1;
}

const char *jump_word(int kind) {
    return kind == __SG_J_BREAK ? "break" : kind == __SG_J_CONTINUE ? "continue" : "return";
}

// What sent threads a and b apart since the last barrier they both passed, for a message: "; thread
// (40, 0, 0) took the `continue` at f.cu:19 and thread (0, 0, 0) did not" (the first jump statement
// one took and the other did not), or "" where the emulator saw none (a plain branch, a jump inside
// a macro).
std::string parting(const Fiber *a, const Fiber *b) {
    for (const Fiber *x : {a, b}) {
        const Fiber *y = x == a ? b : a;
        int i = parting_jump(x, y);
        if (i >= 0)
            return format("; thread %s took the `%s` at %s:%d and thread %s did not", ids_text(x->hdr->threadIdx).c_str(),
                          jump_word(x->jump_kind[i]), x->jump_file[i], x->jump_line[i],
                          ids_text(y->hdr->threadIdx).c_str());
    }
    return std::string();
}

void yield_here(Fiber *f, const char *what, const char *file, int line, uintptr_t pc, const void *addr,
                unsigned size) {
    Block *B = f->blk;
    uint64_t value = 0;
    if (addr) std::memcpy(&value, addr, size < 8 ? size : 8);
    uint64_t sig = mix(mix(file ? uintptr_t(file) : pc, uint64_t(line)), mix(uintptr_t(addr), value)) | 1;
    bool fresh = true;
    for (unsigned i = 0; i < kSigs; ++i)
        if (f->sigs[i] == sig) fresh = false;
    if (fresh) {
        f->sigs[f->sig_pos++ % kSigs] = sig;
        B->progress = true;
    }
    f->poll_what = what;
    f->poll_file = file;
    f->poll_line = line;
    f->poll_pc = pc;
    f->state = kYielded;
    B->next.push_back(f->linear);
    B->yielded = true;
    B->w->next_in_round(f);
    f->state = kRunnable;
}

}  // namespace sg::rt
