// Warp-level primitives under independent thread scheduling: each row of `out` (32 words, one per
// lane) is what one test of one warp computes. tests/backends/test_emulator_warp.py holds what an NVIDIA H100
// computed for the same rows (this file's twin, compiled with nvcc -arch=sm_90), row by row.
// Launched with one warp: (const int* in, int* out, int n); in[0] = 0.

#include <cooperative_groups.h>
namespace cg = cooperative_groups;

#define ROW(r) out[(r) * 32 + lane]

__global__ void warp_semantics(const int* in, int* out, int n) {
    const unsigned lane = threadIdx.x & 31;
    // 0-1: a branch taken by lanes 0-15, the others at __syncthreads() (CS149's second-level scan)
    if (threadIdx.x < 16) {
        unsigned m = __activemask();
        ROW(0) = m;
        ROW(1) = __ballot_sync(m, lane & 1);
    }
    __syncthreads();
    // 2: lane 0 spins a while (atomics: yield points), then every lane after the branch
    if (lane == 0)
        for (int i = 0; i < 20; ++i) atomicAdd(&out[64 * 32], 1);
    ROW(2) = __activemask();
    // 3-4: a loop whose trip count depends on the lane, __activemask() in it and after it
    unsigned inside = 0;
    for (unsigned i = 0; i < lane % 4; ++i) inside ^= __activemask() * (i + 1);
    ROW(3) = inside;
    ROW(4) = __activemask();
    // 5: each arm of an if/else
    if (lane < 10) ROW(5) = __activemask(); else ROW(5) = __activemask() | 0;
    // 6-12: shuffles across a width
    ROW(6) = __shfl_xor_sync(0xffffffffu, lane + 100, 16, 16);
    ROW(7) = __shfl_xor_sync(0xffffffffu, lane + 100, 9, 8);
    ROW(8) = __shfl_down_sync(0xffffffffu, lane + 100, 33);
    ROW(9) = __shfl_up_sync(0xffffffffu, lane + 100, 33);
    ROW(10) = __shfl_sync(0xffffffffu, lane + 100, -1, 8);
    ROW(11) = __shfl_down_sync(0xffffffffu, lane + 100, 3, 8);
    ROW(12) = __shfl_up_sync(0xffffffffu, lane + 100, 3, 8);
    // 13-15: votes of two halves with disjoint masks, in converged code
    unsigned hm = lane < 16 ? 0x0000ffffu : 0xffff0000u;
    ROW(13) = __ballot_sync(hm, 1);
    ROW(14) = __any_sync(hm, lane == 3);
    ROW(15) = __all_sync(hm, lane != 20);
    // 16-20: matches
    int pv;
    ROW(16) = __match_any_sync(0xffffffffu, lane / 8);
    ROW(17) = __match_all_sync(0xffffffffu, 7, &pv);
    ROW(18) = pv;
    ROW(19) = __match_all_sync(0xffffffffu, lane == 5, &pv);
    ROW(20) = pv;
    // 21-26: reductions (sm_80+), one with two disjoint masks
    ROW(21) = __reduce_add_sync(lane < 16 ? 0x0000ffffu : 0xffff0000u, lane);
    ROW(22) = (unsigned)__reduce_min_sync(0xffffffffu, (int)lane - 5);
    ROW(23) = __reduce_max_sync(0xffffffffu, lane * 7 % 13);
    ROW(24) = __reduce_and_sync(0xffffffffu, lane | 0x40);
    ROW(25) = __reduce_or_sync(0xffffffffu, 1u << lane % 8);
    ROW(26) = __reduce_xor_sync(0xffffffffu, lane);
    // 27: a ballot inside a branch, with the branch's lanes as its mask
    if (lane < 16) ROW(27) = __ballot_sync(0xffffu, lane > 3);
    // 28-36: cooperative groups: tiles of 8 (static), of 16 (dynamic), the coalesced lanes of a branch
    cg::thread_block blk = cg::this_thread_block();
    cg::thread_block_tile<8> t8 = cg::tiled_partition<8>(blk);
    ROW(28) = t8.shfl(lane + 100, 2);
    ROW(29) = t8.ballot(lane & 1);
    ROW(30) = t8.shfl_down(lane + 100, 1);
    ROW(31) = t8.meta_group_rank() * 100 + t8.thread_rank();
    cg::thread_group tg = cg::tiled_partition(blk, 16);
    ROW(32) = tg.thread_rank() + 100 * tg.size();
    if (lane % 3 == 0) {
        cg::coalesced_group cgp = cg::coalesced_threads();
        ROW(33) = cgp.size() * 1000 + cgp.thread_rank();
        ROW(34) = cgp.shfl(lane + 100, 0);
        ROW(35) = cgp.ballot(1);
    }
    ROW(36) = t8.any(lane == 9) + 10 * t8.all(lane < 30);
    // 37-38: an if/else inside a loop: each iteration's own lanes
    for (int i = 0; i < 2; ++i) {
        if ((lane + i) & 1) ROW(37 + i) = __activemask(); else ROW(37 + i) = __activemask() + 0;
    }
    // 39: after lane 31 exited
    if (lane == 31) return;
    ROW(39) = __activemask();
}

// Lane 0 takes __activemask() and then releases lanes 1-31, which spin on a flag it sets: waiting for
// them at the call would never end, so lane 0 goes on alone (forward progress), with a warning.
__global__ void activemask_spin(const int* in, int* out, int n) {
    const unsigned lane = threadIdx.x & 31;
    volatile int* flag = out + 32;
    if (lane == 0) {
        out[0] = __activemask();  // LINE:spin_mask
        *flag = 1;
    } else {
        while (*flag == 0) {  // LINE:spin_poll
        }
        out[lane] = 1;
    }
}
