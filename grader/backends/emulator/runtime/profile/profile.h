// The runtime: the memory-access profile (bank conflicts and coalescing), its types and state; its
// functions are defined in profile/profile.cpp. Off unless the executor asked for it
// (sg_profile_set); the memory hooks then cost one predicted branch.
#pragma once

#include "grid/launch.h"

namespace sg::rt {

//
// What is counted, per kernel and per program point (pc) of a plain or volatile load/store:
//   * Grouping: the lanes of a warp do not run in lockstep here, so the k-th execution of a pc by
//     lane l is matched with the k-th execution of the same pc by the other lanes of its warp: one
//     request (one warp-wide instruction). The per-lane counters restart at every __syncthreads,
//     so code that diverges before a barrier realigns after it. A request is complete when every
//     lane of the warp took part, or at the next barrier or the end of the block (diverged code:
//     the lanes that took part are the active lanes).
//   * Shared memory (an address in the block's shared memory): 32 banks of 4-byte words, bank =
//     (address / 4) mod 32. Accesses of 1 to 4 bytes are one phase of the 32 lanes; 8-byte
//     accesses two phases of 16 lanes (half-warps) and 16-byte accesses four of 8 lanes
//     (quarter-warps), each lane touching 2 or 4 consecutive words. A phase takes as many
//     wavefronts as the most distinct words any one bank holds among its lanes' words (the same
//     word for several lanes is a broadcast: one word). Per request: wavefronts = the sum over
//     phases that have an active lane; ideal wavefronts = the number of such phases; conflict
//     wavefronts = wavefronts - ideal (Nsight Compute's l1tex__data_bank_conflicts_pipe_lsu_mem_
//     shared_op_ld/st); degree = the largest phase's wavefronts (an n-way bank conflict).
//   * Global memory (an address in a device allocation): the distinct 32-byte sectors the active
//     lanes' bytes fall in, per request (l1tex__t_sectors_pipe_lsu_mem_global_op_ld/st over
//     l1tex__t_requests_...); ideal sectors = ceil(active lanes * access size / 32).
//   * Not counted: atomics, accesses to local variables, __device__/__constant__ variables.
//   * Steps (the scan's work and span), per launch: a thread's steps are its memory operations,
//     every plain or volatile load or store and every atomic it makes, whatever the address
//     (shared, global, a __device__ variable, another thread's stack) but its own stack (its
//     locals, its threadIdx and blockIdx: registers on a GPU); span = the most steps of one thread
//     of the profiled blocks, work = their sum over the threads of those blocks, barriers = the
//     most __syncthreads() (barrier releases) of one profiled block.
//   * A poll's repeat: a volatile load of the address the thread's previous step loaded (volatile
//     too), with no other memory operation of the thread between, is neither a step nor a request
//     (in no count): a wait is not work (the work-span model counts operations, not waiting), and
//     how often a poll repeats depends on the schedule, which the counts must not. A plain load is
//     always counted: the compiler kept it, and the GPU makes it.
// Only the first `max_blocks` blocks of each launch (linear block index; 0: all) are profiled.

struct ProfStats {
    uint64_t requests = 0, wavefronts = 0, ideal = 0, sectors = 0, ideal_sectors = 0, bytes = 0;
    uint32_t worst_degree = 0;  // shared: the largest n-way conflict of one request
    int64_t worst_stride = 0;   // shared: the address distance of the first two active lanes in that request, bytes
    uint32_t worst_mask = 0;    // shared: that request's active lanes
    uintptr_t worst_addr[32];   // shared: their addresses (lanes in worst_mask)
    unsigned char space = 0;    // 's' shared, 'g' global
    unsigned char write = 0;
    unsigned char size = 0;
};

struct ProfRec {
    uint32_t mask = 0;
    uintptr_t addr[32];
};

struct ProfPc {
    std::vector<uint32_t> count;              // per lane: executions of this pc since the last barrier
    std::vector<std::vector<ProfRec>> open;  // [warp][k]: the lanes' addresses so far (mask 0: none or closed)
    ProfStats st;
};

struct ProfBlock {
    const Block *blk = nullptr;
    uint32_t inst = 0;
    unsigned n = 0;
    std::unordered_map<uint32_t, ProfPc> pcs;  // pc offset in the module -> state (nodes: stable addresses)
    size_t open_records = 0;                   // records allocated since the last flush (memory bound)
    std::vector<uint64_t> steps;               // per thread: memory operations (loads, stores, atomics)
    std::vector<uintptr_t> last_load;          // per thread: the address its previous step loaded (0: it stored)
    uint64_t barriers = 0;                     // barrier releases of the block
    struct {
        uint32_t off;
        ProfPc *pc;
    } cache[64];  // direct-mapped cache of pcs lookups (pc null: empty)

    void reset(const Block *b, uint32_t i, unsigned count) {
        blk = b, inst = i, n = count;
        pcs.clear();
        open_records = 0;
        steps.assign(count, 0);
        last_load.assign(count, 0);
        barriers = 0;
        std::memset(cache, 0, sizeof cache);
    }
    ProfPc &at(uint32_t off) {
        auto &c = cache[(off * 2654435761u) >> 26];
        if (c.pc && c.off == off) return *c.pc;
        ProfPc &pc = pcs[off];
        c.off = off, c.pc = &pc;
        return pc;
    }
};

inline int g_profile = 0;                  // profiling the running launch
inline int g_profile_on = 0;               // sg_profile_set: profile the next launches
inline uint64_t g_profile_max_blocks = 1;  // profile blocks with linear index < this (0: all)
inline const char *g_profile_kernel = "";
inline std::vector<std::pair<uintptr_t, uintptr_t>> g_profile_allocs;  // device allocations, sorted by base
inline std::mutex g_profile_mu;
// (kernel, pc offset) -> totals of the profiled blocks since the last sg_profile_take
// The totals' key order, of its own: std::pair's operator< is a template of namespace std, which a
// unit of the runtime built in several compiles would emit as a global weak name that the plain
// compile does not have (the build makes local only the names of sg::rt).
struct ProfKeyLess {
    bool operator()(const std::pair<std::string, uint32_t> &a, const std::pair<std::string, uint32_t> &b) const {
        int c = a.first.compare(b.first);
        return c < 0 || (c == 0 && a.second < b.second);
    }
};
inline std::map<std::pair<std::string, uint32_t>, ProfStats, ProfKeyLess> g_profile_totals;

// The steps of one launch (see the head of this file), over its profiled blocks.
struct ProfSteps {
    std::string kernel;
    uint64_t span = 0, work = 0, barriers = 0, blocks = 0;
};
inline ProfSteps g_profile_launch;                    // the running launch's (under g_profile_mu)
inline std::vector<ProfSteps> g_profile_launches;     // the launches since the last sg_profile_take, in order

// Per worker (Worker::id < 64, only that worker's thread touches its row) and resident slot.
inline ProfBlock g_prof[64][kResident];

// Defined in profile/profile.cpp.
ProfBlock *prof_block(Block *B);
ProfBlock *profile_step(Fiber *f, uintptr_t addr, int load = 0);
void profile_access(uintptr_t addr, unsigned size, int write, uintptr_t pc, int poll = 0);
void profile_barrier(Block *B);
void profile_block_end(Block *B);
void profile_launch_begin(const Launch *L, const sg_launch_config *cfg);
void profile_launch_end();

// Records allocated between two barriers before the profile closes them all as if at a barrier:
// bounds the memory (about 17 MiB) of a long loop with no barrier that one lane runs alone.
constexpr size_t kMaxOpenRecords = 65536;

}  // namespace sg::rt
