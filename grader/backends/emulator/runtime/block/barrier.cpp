// The runtime, block level: releasing a barrier.
#include "block/rounds.h"
#include "block/loops.h"
#include "checks/findings.h"
#include "memory/access.h"
#include "profile/profile.h"

namespace sg::rt {

// Whether threads of block B wait at different barriers (plain mode too: a GPU does not run this as
// written), which fails the block as barrier-divergence; `*first`: the first thread waiting.
static bool barrier_diverges(Worker *w, Block *B, Fiber **first_out) {
    *first_out = nullptr;
    Fiber *&first = *first_out;
    for (unsigned t = 0; t < B->n; ++t) {
        Fiber &f = B->fibers[t];
        if (f.state != kAtBarrier) continue;
        if (!first) {
            first = &f;
            continue;
        }
        if (f.site_line == first->site_line &&
            (f.site_file == first->site_file || std::strcmp(f.site_file, first->site_file) == 0))
            continue;
        Finding fd = make_finding(&f, Kind::barrier_divergence);
        loc_site(fd.loc, sizeof fd.loc, f.site_file, f.site_line);
        loc_site(fd.other, sizeof fd.other, first->site_file, first->site_line);
        fd.has_other = 1;
        fd.oblock = fd.block;
        fd.othread = first->hdr->threadIdx;
        std::snprintf(fd.msg, sizeof fd.msg,
                      "threads of a block wait at different __syncthreads(): thread %s at {L}, thread %s "
                      "at {O}%s",
                      ids_text(f.hdr->threadIdx).c_str(), ids_text(first->hdr->threadIdx).c_str(),
                      parting(&f, first).c_str());
        add_finding(w, fd);
        w->block_error(B, &f, fd.kind, fd.msg);
        return true;
    }
    return false;
}

// Checks on: the barrier `first` waits at releases while threads of block B have exited: a warning
// (once a block), not an error: since sm_70 a thread that has exited no longer counts at a
// barrier, so the others go on (measured on an H100: compute-sanitizer's synccheck is silent, and
// the output is right); CUDA's guide still asks for every thread.
static void note_early_exit(Worker *w, Block *B, Fiber *first) {
    if (B->live == B->n || B->early_exit_noted) return;
    Fiber *gone = nullptr;
    for (unsigned t = 0; t < B->n && !gone; ++t)
        if (B->fibers[t].state == kDone) gone = &B->fibers[t];
    B->early_exit_noted = true;
    Finding fd = make_finding(first, Kind::early_exit);
    loc_site(fd.loc, sizeof fd.loc, first->site_file, first->site_line);
    int j = parting_jump(gone, first);
    std::string left = j < 0 ? std::string()
                             : format(", at the `%s` at %s:%d", jump_word(gone->jump_kind[j]), gone->jump_file[j],
                                      gone->jump_line[j]);
    std::snprintf(fd.msg, sizeof fd.msg,
                  "%u threads wait at __syncthreads() at {L} while %u threads of the block (thread %s "
                  "first%s) have exited: a GPU since Volta lets the others go on (exited threads do "
                  "not count at a barrier), but CUDA asks every thread of the block to reach each "
                  "__syncthreads(): keep the threads past n in the loop and guard only their loads "
                  "and stores",
                  B->at_barrier, B->n - B->live, ids_text(gone->hdr->threadIdx).c_str(), left.c_str());
    add_finding(w, fd);
}

// The threads waiting at block B's barrier become runnable, in the order of the launch's schedule,
// each starting a new stretch of the common path (its jumps since the barrier forgotten).
static void wake_barrier_waiters(Worker *w, Block *B) {
    B->order.clear();
    const unsigned n = B->n;
    for (unsigned t = 0; t < n; ++t)
        if (B->fibers[t].state == kAtBarrier) B->fibers[t].njumps = 0;
    if (w->launch->schedule == kDescending) {
        for (unsigned t = n; t-- > 0;)
            if (B->fibers[t].state == kAtBarrier) B->fibers[t].state = kRunnable, B->order.push_back(t);
        return;
    }
    for (unsigned t = 0; t < n; ++t)
        if (B->fibers[t].state == kAtBarrier) B->fibers[t].state = kRunnable, B->order.push_back(t);
    if (w->launch->schedule == kRandom) w->arrange(B, B->order);
}

void Worker::release_barrier(Block *B) {
    Launch *L = launch;
    if (g_profile) profile_barrier(B);
    Fiber *first;
    if (barrier_diverges(this, B, &first)) return;
    if (first && loop_step(this, B, first)) return;
    if (L->checks) {
        if (first) note_early_exit(this, B, first);
        B->last_bar_time = L->clock.fetch_add(1) + 1;
        // What each thread acquired is every thread's after the barrier (causality order runs
        // through bar.sync: the PTX ISA, "Memory Consistency Model", base causality order).
        for (unsigned t = 0; t < B->n; ++t)
            if (!B->fibers[t].know.empty()) kmerge(B->know, B->fibers[t].know), B->fibers[t].know.clear();
    }
    B->rel_count = B->acc_count, B->rel_and = B->acc_and, B->rel_or = B->acc_or;
    B->acc_count = 0, B->acc_and = 1, B->acc_or = 0;
    wake_barrier_waiters(this, B);
    B->at_barrier = 0;
    ++B->bar_epoch;
    B->progress = true;
}

}  // namespace sg::rt
