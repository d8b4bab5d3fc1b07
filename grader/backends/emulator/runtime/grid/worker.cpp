// The runtime, grid level: a worker's loop over the launch's blocks.
#include "grid/launch.h"
#include "grid/faults.h"
#include "block/rounds.h"
#include "block/loops.h"
#include "checks/findings.h"
#include "memory/access.h"
#include "profile/profile.h"
#include "warp/rendezvous.h"

namespace sg::rt {

// ---------------------------------------------------------------------------------------------
// A worker's loop: admits blocks of the launch into its slots, runs their rounds, retires them.
// ---------------------------------------------------------------------------------------------
// Milliseconds since the first of the deadlock passes in a row (`passes` 1 starts the clock).
static double stuck_for_ms(std::chrono::steady_clock::time_point &since, unsigned passes) {
    auto now = std::chrono::steady_clock::now();
    if (passes <= 1) since = now;
    return std::chrono::duration<double, std::milli>(now - since).count();
}

// The state of one worker's loop over a launch (Worker::run): its resident blocks and how long
// they have been stuck.
struct ResidentBlocks {
    Worker *w;
    Launch *L;
    unsigned nres = 0;       // busy slots
    bool no_more = false;    // no block of the launch is left to admit (or admitting one failed)
    bool want_more = false;  // the last round yielded: admit another block while a slot is free
    Block *last = nullptr;   // the block to continue (its round ended at barriers only)
    unsigned stuck_passes = 0;
    std::chrono::steady_clock::time_point stuck_since{};  // when stuck_passes became 1
};

// Installs the worker's alternate signal stack (made on first use), so that a fault on a fiber's
// stack (an overflow) can still be handled; whether it is installed (`previous`: the one before).
static bool enter_altstack(Worker *w, stack_t *previous) {
    if (!w->altstack) {
        void *m = mmap(nullptr, kAltStack, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        w->altstack = m == MAP_FAILED ? nullptr : static_cast<char *>(m);
    }
    if (!w->altstack) return false;
    stack_t ss;
    ss.ss_sp = w->altstack;
    ss.ss_size = kAltStack;
    ss.ss_flags = 0;
    return sigaltstack(&ss, previous) == 0;
}

// Block B leaves its slot (it ended, failed, or another block failed before it).
static void retire(ResidentBlocks &r, Block *B) {
    B->busy = false, --r.nres, r.last = nullptr;
}

// The launch moved on: the worker's count of progress grows, and it is no longer stuck.
static void note_progress(ResidentBlocks &r) {
    r.w->progress.fetch_add(1, std::memory_order_release);
    r.w->stuck.store(0);
    r.stuck_passes = 0;
}

// Once a block failed (or the launch aborts), the blocks after it are not run on: only the lowest
// failing block is reported. Whether the launch aborts.
static bool drop_blocks_after_failure(ResidentBlocks &r) {
    uint64_t fb = r.L->fail_block.load(std::memory_order_relaxed);
    bool aborting = r.L->abort.load(std::memory_order_relaxed);
    if (fb == UINT64_MAX && !aborting) return aborting;
    for (auto &s : r.w->slots)
        if (s && s->busy && (aborting || s->linear > fb)) retire(r, s.get());
    return aborting;
}

// Takes the launch's next block to run here (sampled out blocks skipped) into a free slot; none
// left (or a failure before it, or the abort) ends admission, and so does a block that cannot start
// (an internal failure of that block).
static void admit_block(ResidentBlocks &r, bool aborting) {
    Launch *L = r.L;
    uint64_t b = L->next_block.fetch_add(1);
    while (b < L->nblocks && !L->runs_block(b)) b = L->next_block.fetch_add(1);  // not sampled: skipped
    if (b >= L->nblocks || b > L->fail_block.load() || aborting) {
        r.no_more = true;
        return;
    }
    Block *B = nullptr;
    for (auto &s : r.w->slots) {
        if (!s) s.reset(new (std::nothrow) Block());
        if (s && !s->busy) {
            B = s.get();
            break;
        }
    }
    std::string why;
    if (!B || !r.w->start_block(B, b, why)) {
        ErrorRecord rec;
        rec.set = true;
        rec.block_linear = b;
        rec.kind = Kind::internal;
        std::snprintf(rec.message, sizeof rec.message, "%s", B ? why.c_str() : "out of memory");
        L->report(rec);
        r.no_more = true;
        return;
    }
    ++r.nres;
    r.last = B;
}

// The block to run next: the last one again where its round ended at barriers only, else a
// resident block at random (seeded).
static Block *pick_block(ResidentBlocks &r) {
    Block *B = r.last;
    if (B && B->busy && !B->yielded) return B;
    unsigned pick = unsigned(splitmix(r.w->rng) % r.nres);
    for (auto &s : r.w->slots)
        if (s && s->busy && pick-- == 0) return s.get();
    return B;
}

// After a round of block B begun at the launch's progress `before` (`watched`: its stores were seen
// all round): retires it where it failed or ended, and judges whether the round changed anything.
// Whether B is stale now (its round changed nothing that can be proved).
static bool round_left_stale(ResidentBlocks &r, Block *B, uint64_t before, bool watched) {
    if (B->failed) {
        r.L->report(B->error);
        retire(r, B);
        return false;
    }
    if (B->live == 0) {
        if (g_profile) profile_block_end(B);
        retire(r, B);
        note_progress(r);
        return false;
    }
    r.last = B;
    r.want_more = B->yielded;
    int repeats = B->progress ? 2 : poll_repeats(B, watched);
    B->lv_on = B->lw.have || !B->progress;  // a round without progress: watch its stores from now on
    if (repeats == 1) {  // no proof yet that the round changed nothing: the next one tells
        B->stale = false;
        return false;
    }
    if (repeats == 2) {
        B->stale = false;
        note_progress(r);
        return false;
    }
    // A round that changed nothing may still have read something new: a poll loads a flag and
    // yields, and its thread acts on the value only in its next round. So a block counts as
    // stuck at `before` only after two such rounds in a row, both begun at that progress: the
    // second acted on what the first read, and read again.
    B->stale_rounds = B->stale && B->stale_at == before ? B->stale_rounds + 1 : 1;
    B->stale = true;
    B->stale_at = before;
    return true;
}

// Every resident block of this worker is stale: where every worker's are (deadlock_check), lanes
// waiting at an __activemask() for spinning lanes go on, else a failed block aborts the launch,
// else the deadlock is reported (when detection is on) or waited out, as a GPU would hang.
static void on_stale_blocks(ResidentBlocks &r) {
    Worker *w = r.w;
    Launch *L = r.L;
    if (!w->deadlock_check(r.nres)) {
        if (w->stuck.load()) std::this_thread::yield();
        return;
    }
    bool released = false;
    for (auto &s : w->slots)
        if (s && s->busy && s->am_pending && release_activemask(s.get())) released = true;
    if (released) {
        note_progress(r);
        return;
    }
    if (L->fail_block.load() != UINT64_MAX) {
        L->abort.store(true);  // a failed block is what the others wait for
    } else if (L->detect_deadlock &&
               ((stuck_for_ms(r.stuck_since, ++r.stuck_passes) >= 250 || (r.no_more && others_idle(L, w))) &&
                r.stuck_passes >= 3)) {
        // Three passes with nothing changed, a quarter of a second apart at least: another
        // worker the OS has not run for a while (a loaded machine) may be about to free this one.
        // Where every block has been taken and every other worker has ended, none can: at once.
        w->report_deadlock();
    } else {
        struct timespec ts = {0, 1000000};  // wait (like a GPU would hang) without burning a core
        nanosleep(&ts, nullptr);
    }
}

void Worker::run(Launch *L) {
    launch = L;
    stack_t previous;
    bool alt = enter_altstack(this, &previous);
    tl_worker = this;
    rng = mix(L->seed ^ 0x5bd1e995ull, id + 1);
    std::memset(dedup, 0, sizeof dedup);
    ResidentBlocks r{this, L};
    for (;;) {
        bool aborting = drop_blocks_after_failure(r);
        if (!r.no_more && r.nres < kResident && (r.nres == 0 || r.want_more)) {
            admit_block(r, aborting);
            r.want_more = false;
        }
        if (r.nres == 0) break;
        Block *B = pick_block(r);
        // The launch's progress before the round: a round that changed nothing is stale as of then.
        // Taken after it, a store another worker made while the round ran (and counted at its end)
        // would stamp a block that never saw it as stale at the new count: three passes of picking
        // its neighbours, and a deadlock was reported that the next round of that block would end.
        uint64_t before = total_progress(L);
        bool watched = B->lv_on;  // its stores seen all round (poll_repeats)
        run_round(B);
        if (!B->failed) after_round(B);
        if (!round_left_stale(r, B, before, watched)) continue;
        if (!r.no_more && r.nres < kResident) continue;  // admit another block first
        on_stale_blocks(r);
    }
    idle.store(true);
    tl_worker = nullptr;
    if (alt) sigaltstack(&previous, nullptr);
    launch = nullptr;
}

}  // namespace sg::rt
