// The runtime, grid level: a launch, the workers (OS threads) that run its blocks, and the
// module's globals.
#pragma once

#include "util.h"
#include "block/block.h"
#include "grid/registry.h"

namespace sg::rt {

struct Launch {
    const Kernel *kernel = nullptr;
    void *const *args = nullptr;
    dim3 grid, block;
    uint64_t nblocks = 0;
    unsigned nthreads = 0;
    size_t dyn_shared = 0;
    size_t shared_limit = 0;
    int schedule = 0;
    uint64_t seed = 0;
    bool checks = false;
    bool detect_deadlock = false;
    uint32_t shared_fill = 0xA5A5A5A5u;  // what unwritten shared memory reads (sg_launch_config)
    // with checks: the switches before plain accesses (memory/access.h, interleave) and the sampled
    // blocks (sg_launch_config's sample_mode and sample; `sample` sorted)
    uint32_t interleave = 0;
    int sample_mode = 0;
    std::vector<uint64_t> sample;
    uint32_t inst_base = 0;
    std::atomic<uint64_t> next_block{0};
    std::atomic<uint64_t> fail_block{UINT64_MAX};
    std::atomic<bool> abort{false};
    std::mutex mu;
    ErrorRecord error;
    Worker *workers[64];
    unsigned nworkers = 0;
    // checks
    std::vector<Alloc> allocs;  // sorted by base
    std::atomic<uint32_t> clock{1};
    // views snapshotted at releases (checks/order.cpp, snapshot): id i at snaps[(i - 1) / kSnapChunk][(i - 1) % kSnapChunk]
    std::unique_ptr<KView[]> snaps[kSnapChunks];
    uint32_t nsnaps = 0;
    // held by a checked strong operation of global memory while it runs and its record is read and
    // written (memory/access.h, OrderLock), so that what it observes is what it read
    std::atomic<bool> order_busy{false};
    std::mutex snap_mu;  // taken to add a snapshot
    std::mutex fmu;
    std::vector<Finding> findings;
    uint64_t fseq = 0;
    uint64_t fdropped = 0;

    // Whether block b is one of the sampled blocks.
    bool sampled(uint64_t b) const { return std::binary_search(sample.begin(), sample.end(), b); }
    // Whether block b's accesses are checked: with checks on, every block, or the sampled ones
    // where the launch samples.
    bool checks_block(uint64_t b) const { return checks && (sample_mode == 0 || sampled(b)); }
    // Whether block b runs: every block, or the sampled ones only where the launch skips the others.
    bool runs_block(uint64_t b) const { return !checks || sample_mode != 1 || sampled(b); }

    void report(const ErrorRecord &rec) {
        std::lock_guard<std::mutex> lock(mu);
        if (!error.set || rec.block_linear < error.block_linear) {
            error = rec;
            error.set = true;
        }
        uint64_t cur = fail_block.load();
        while (error.block_linear < cur && !fail_block.compare_exchange_weak(cur, error.block_linear)) {
        }
    }
};

struct Worker {
    unsigned id = 0;
    std::unique_ptr<Block> slots[kResident];
    Context sched;
    Launch *launch = nullptr;
    Fiber *running = nullptr;  // the fiber executing now (null while the scheduler runs)
    // The record of a volatile store of global memory whose hook its running thread has just left:
    // its value may not be in memory yet (checks/races.cpp, word_in_flight). Cleared at the thread's
    // next checked access or fence, or when it gives up the worker.
    std::atomic<const Pub *> vstore{nullptr};
    // the word whose record a checked volatile load of this worker's running thread took, until its
    // next step: the load itself may still be to come, so no older value goes into that word
    std::atomic<const Pub *> vload{nullptr};
    char *altstack = nullptr;
    uint64_t rng = 0;
    alignas(64) std::atomic<uint64_t> progress{0};
    std::atomic<uint64_t> stuck{0};  // 1 + the total progress at which all its blocks were stale
    std::atomic<bool> idle{false};
    uint64_t dedup[4096];
    uint64_t dedup_block[4096];  // the lowest block that had it

    ~Worker() { trim(); }

    void trim() {
        for (auto &s : slots) s.reset();
        if (altstack) munmap(altstack, kAltStack);
        altstack = nullptr;
    }

    void run(Launch *L);
    bool start_block(Block *B, uint64_t b, std::string &why);
    void run_round(Block *B);
    void after_round(Block *B);
    void release_barrier(Block *B);
    void stuck_block(Block *B);
    bool deadlock_check(unsigned nres);
    void report_deadlock();
    [[noreturn]] void fail(Fiber *f, Kind kind, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
    void block_error(Block *B, Fiber *f, Kind kind, const std::string &msg);
    Fiber *fiber_owning(uintptr_t addr, bool *in_guard) const;
    void next_in_round(Fiber *from);
    void arrange(Block *B, std::vector<unsigned> &v);
};

inline uint64_t total_progress(Launch *L) {
    uint64_t t = 0;
    for (unsigned i = 0; i < L->nworkers; ++i) t += L->workers[i]->progress.load(std::memory_order_acquire);
    return t;
}

inline Fiber *current_fiber() {
    if (__builtin_expect(tl_stale.addr != 0, 0)) put_back_stale();  // the load given an older value has run
    return static_cast<Fiber *>(__sg_self()->fiber);
}

// Globals of this module's runtime: set around a launch.
inline std::atomic<int> g_active{0};
inline uintptr_t g_module_base = 0;
inline std::vector<std::pair<uintptr_t, uintptr_t>> g_segments;  // this module's loaded segments

inline std::mutex g_launch_mu;  // one launch at a time per module
inline std::vector<std::unique_ptr<Worker>> g_workers;

}  // namespace sg::rt
