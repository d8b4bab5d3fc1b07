// The runtime, block level: a CUDA thread (a fiber) and a resident block (its fibers, its
// shared-memory arena, its round lists and warps, its shadow for the checks).
#pragma once

#include "util.h"
#include "block/context.h"
#include "memory/order.h"
#include "memory/shadow.h"
#include "checks/finding.h"
#include "warp/warp.h"

namespace sg::rt {

enum FiberState : unsigned char { kRunnable, kYielded, kAtBarrier, kAtWarp, kDone };

struct Block;
struct Worker;
struct Launch;

struct Fiber {
    Context cx;
    __sg_ThreadCtx *hdr = nullptr;  // top of this fiber's stack region
    char *stack_lo = nullptr;       // lowest usable byte (just above the guard page)
    Block *blk = nullptr;
    unsigned linear = 0;
    FiberState state = kDone;
    // where it waits (barrier or warp intrinsic)
    const char *site_file = nullptr;
    int site_line = 0;
    int site_op = 0;
    // its last yield
    const char *poll_what = nullptr;
    const char *poll_file = nullptr;
    int poll_line = 0;
    uintptr_t poll_pc = 0;
    uint64_t sigs[kSigs];
    unsigned sig_pos = 0;
    // its registers and stack at its last yield, hashed twice (block/loops.cpp, poll_repeats), and
    // the block's round it yielded at (0: none recorded)
    uint64_t yhash[2] = {0, 0};
    uint64_t yround = 0;
    // warp rendezvous
    uint64_t wval = 0, wres = 0;
    int warg = 0;
    uint16_t wserial = 0;  // serial of the last rendezvous of its warp it took part in
    // the first distinct return / break / continue statements it took since the last barrier it
    // passed (rewrite/rewriter.py reports them): what made it leave the path of threads that did not
    const char *jump_file[kJumps];
    int jump_line[kJumps];
    unsigned char jump_kind[kJumps];
    unsigned njumps = 0;
    // memory order (checks): its last .gpu release (a fence, or a store with release order), its
    // block's last barrier before it and the snapshot of its view then; what it acquired since its
    // block's last barrier (`know`), what its strong loads observed and no acquire has taken yet
    // (`pend`), and the latest store of each other block it read
    uint32_t rel_time = 0, rel_bar = 0, rel_snap = 0, lrel = 0;  // lrel: its last release of any scope (.cta too)
    KView know, pend;
    uintptr_t vol_addr = 0;  // its last volatile load of global memory, not yet settled (checks/access.cpp)
    const Pub *dep = nullptr;            // the store of another block it last observed (Pub::dep) and its time
    uint32_t dep_time = 0;
    Obs obs[kObs];
    unsigned nobs = 0;
    // the last store whose older value a load of it was given (checks/races.cpp, give_stale): a GPU
    // gives a thread that polls the new value in the end, so the next load of it reads memory
    const Pub *stale_at = nullptr;
    uint32_t stale_time = 0;
    // an atomic load's older value to return instead of the one it read (give_stale), where set
    bool stale_ready = false;
    unsigned char stale_val[16];
    int scope_next = __SG_SCOPE_DEVICE;  // the scope of its next __atomic builtin or fence (__sg_scope)
};

// One shared array of a block: the dynamic part (index 0) or a __shared__ variable.
struct ShArr {
    size_t off, bytes, elem;
    const char *name;
};

struct SlotState {
    uint64_t gen = 0;
    void *ptr = nullptr;
};

struct Chunk {
    char *base;
    size_t len;
};

inline std::atomic<unsigned> g_next_slot_id{0};

inline size_t page_size() {
    static size_t p = size_t(sysconf(_SC_PAGESIZE));
    return p;
}

// Fills bytes [off, off + len) of a block's shared-memory arena with the launch's fill word, laid
// from the arena's (page-aligned) start: an aligned 4-byte element reads the word itself, an
// 8-byte one the word twice.
inline void fill_shared(char *arena, size_t off, size_t len, uint32_t word) {
    unsigned char b[4];
    std::memcpy(b, &word, 4);
    size_t i = off, end = off + len;
    for (; i < end && (i & 3); ++i) arena[i] = char(b[i & 3]);
    for (; i + 4 <= end; i += 4) std::memcpy(arena + i, &word, 4);
    for (; i < end; ++i) arena[i] = char(b[i & 3]);
}

// The watch of one block for an endless loop (block/loops.h, "Endless loops"): Brent's cycle
// search over the block's states at its barrier releases. `ckpt` is the state at the checkpoint
// (the tortoise), byte for byte; `keys`/`vals` the memory outside the block that it accessed since
// then (8-byte chunks and their contents at the checkpoint), where it is alone in the launch.
struct LoopWatch {
    unsigned releases = 0;   // barrier releases of the block so far (the watch starts after kWatchAfter)
    bool have = false;       // a checkpoint is taken
    bool lone = false;       // ... while the block was the only one left in the launch
    bool unprovable = false; // since it: a read of memory another block may write, or too much to log
    uint64_t power = 1, lam = 0;  // Brent: the checkpoint moves when lam reaches power, which doubles
    std::vector<unsigned char> ckpt;
    std::vector<uintptr_t> keys;  // open addressing, 0 free; `used` lists the taken slots
    std::vector<uint64_t> vals;
    std::vector<unsigned> used;
    const char *site_file[4];     // the barrier sites released at since the checkpoint
    int site_line[4];
    unsigned nsites = 0;
};

// One resident block: fibers, shared-memory arena, round lists, warps, shadow (checks).
struct Block {
    Worker *w = nullptr;
    Fiber fibers[kMaxThreads];
    unsigned nfibers = 0;
    std::vector<Chunk> chunks;

    // shared memory arena: [red zone][dynamic part][red zone][array][red zone]..., guard page after
    // arena_cap; `arrays` is the table the memory hooks check shared addresses against.
    char *arena = nullptr;
    size_t arena_cap = 0, arena_map_len = 0, bump = 0, used = 0;
    bool checked = false;  // its accesses are checked (Launch::checks_block): what the memory hooks read
    uint32_t checks_left = 0;  // in a launch of sampled blocks only: accesses still to check (SG_SAMPLED_BLOCK_CHECKS)
    std::vector<ShArr> arrays;
    uint64_t gen = 0;
    std::vector<SlotState> slots;

    // the block running in this slot
    bool busy = false;
    uint64_t linear = 0;
    uint32_t inst = 0;
    unsigned n = 0;
    std::vector<unsigned> order, next;
    unsigned cursor = 0;
    unsigned live = 0, at_barrier = 0;
    int acc_count = 0, acc_and = 1, acc_or = 0;
    int rel_count = 0, rel_and = 1, rel_or = 0;
    Warp warps[kMaxThreads / 32];
    unsigned am_pending = 0;  // __activemask() groups waiting (MaskGroup), over all warps
    bool progress = false, yielded = false, stale = false;
    bool early_exit_noted = false;  // the early-exit warning given (one per block)
    // an endless loop, by proof (block/loops.h, "Endless loops"): whether the memory hooks tell
    // loop_note of the block's accesses (the watch), and the watch's checkpoint
    bool lv_on = false;
    LoopWatch lw;
    bool wrote = false;     // while watched: a store outside its threads' stacks this round
    uint64_t rounds = 0;    // rounds run (run_round)
    uint64_t stale_at = 0;
    unsigned stale_rounds = 0;  // rounds in a row that changed nothing, each begun at progress stale_at
    bool failed = false;
    ErrorRecord error;
    uint64_t rng = 0;
    uint64_t irng = 0;  // the draws of the interleaving (memory/access.h, interleave)
    // checks
    uint32_t bar_epoch = 0, last_bar_time = 0;
    KView know;  // what every thread of the block acquired before its last barrier (block/barrier.cpp, barrier_release)
    std::vector<Cell> sh;
    // per granule of shared memory: the last strong store's thread's last fence (launch clock), where
    // it fenced since the block's last barrier, else 0: what a thread that reads it and then fences
    // comes to know of that thread (checks/races.cpp, track)
    std::vector<uint32_t> sh_rel;
    std::vector<uint32_t> init_inst;
    std::vector<uint8_t> init_mask;
    uintptr_t uninit_pcs[kUninitPcs];  // where this block's uninitialised reads were reported
    unsigned uninit_n = 0;

    Block() {
        order.reserve(kMaxThreads);
        next.reserve(kMaxThreads);
    }
    ~Block() { trim(); }

    void trim() {
        for (Chunk &c : chunks) munmap(c.base, c.len);
        chunks.clear();
        nfibers = 0;
        if (arena) munmap(arena, arena_map_len);
        arena = nullptr;
        arena_cap = arena_map_len = 0;
    }

    // Make at least n fibers, each on its own kStack-aligned region with a guard page at the bottom.
    bool ensure_fibers(unsigned count, std::string &why) {
        if (count <= nfibers) return true;
        unsigned extra = count - nfibers;
        size_t len = (size_t(extra) + 1) * kStack;
        void *m = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (m == MAP_FAILED) {
            why = std::string("cannot map fiber stacks: ") + std::strerror(errno);
            return false;
        }
        char *raw = static_cast<char *>(m);
        char *base = reinterpret_cast<char *>((reinterpret_cast<uintptr_t>(raw) + kStack - 1) & ~(kStack - 1));
        if (base > raw) munmap(raw, size_t(base - raw));
        char *end = base + size_t(extra) * kStack;
        char *raw_end = raw + len;
        if (raw_end > end) munmap(end, size_t(raw_end - end));
        chunks.push_back(Chunk{base, size_t(extra) * kStack});
        for (unsigned i = 0; i < extra; ++i) {
            char *region = base + size_t(i) * kStack;
            if (mprotect(region, page_size(), PROT_NONE) != 0) {
                why = std::string("cannot protect a fiber stack guard page: ") + std::strerror(errno);
                return false;
            }
            Fiber &f = fibers[nfibers + i];
            f.hdr = reinterpret_cast<__sg_ThreadCtx *>(region + kStack - kHeader);
            f.hdr->fiber = &f;
            f.stack_lo = region + page_size();
            f.blk = this;
        }
        nfibers = count;
        return true;
    }

    bool ensure_arena(size_t cap, std::string &why) {
        if (arena && arena_cap >= cap) return true;
        if (arena) munmap(arena, arena_map_len);
        size_t ps = page_size();
        size_t rounded = (cap + ps - 1) / ps * ps;
        // Place the arena so that it ends exactly at the guard page: overruns past the limit fault.
        size_t len = rounded + ps;
        void *m = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED) {
            why = std::string("cannot map the shared-memory arena: ") + std::strerror(errno);
            arena = nullptr;
            return false;
        }
        mprotect(static_cast<char *>(m) + rounded, ps, PROT_NONE);
        arena = static_cast<char *>(m);
        arena_cap = rounded;
        arena_map_len = len;
        return true;
    }

    bool owns_stack(uintptr_t addr) const {
        for (const Chunk &c : chunks) {
            uintptr_t base = reinterpret_cast<uintptr_t>(c.base);
            if (addr >= base && addr < base + c.len) return true;
        }
        return false;
    }
};

}  // namespace sg::rt
