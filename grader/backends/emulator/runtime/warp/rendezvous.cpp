// The runtime, warp level: completing a warp rendezvous (shuffles, votes, reductions, matches).
#include "warp/rendezvous.h"
#include "block/rounds.h"
#include "checks/findings.h"

namespace sg::rt {

const char *warp_op_name(int op) {
    static const char *names[] = {"__syncwarp", "__shfl_sync", "__shfl_up_sync", "__shfl_down_sync",
                                  "__shfl_xor_sync", "__ballot_sync", "__any_sync", "__all_sync",
                                  "__reduce_add_sync", "__reduce_min_sync", "__reduce_max_sync",
                                  "__match_any_sync", "__match_all_sync", "__reduce_and_sync",
                                  "__reduce_or_sync", "__reduce_xor_sync", "__activemask"};
    static_assert(sizeof names / sizeof names[0] == __SG_W_COUNT, "a name for every warp operation");
    return op >= 0 && op < __SG_W_COUNT ? names[op] : "a warp intrinsic";
}

std::string ids_text(uint3 t) { return format("(%u, %u, %u)", t.x, t.y, t.z); }

// The lane a shuffle of lane l reads, as PTX's shfl.sync computes it: the lane operand's low 5 bits
// (a delta of 33 is 1), within the caller's segment of `width` lanes; a source outside it gives the
// caller's own value, except that a butterfly may read a lane of an earlier segment (PTX: j <=
// maxLane; the CUDA guide on __shfl_xor_sync; measured on an H100). -1: `op` is no shuffle.
static int shuffle_source(int op, unsigned l, unsigned width, uint64_t arg) {
    unsigned base = l & ~(width - 1), b = unsigned(arg) & 31;
    switch (op) {
        case __SG_W_IDX: return int(base + (b & (width - 1)));
        case __SG_W_UP: return l < base + b ? int(l) : int(l - b);
        case __SG_W_DOWN: return l + b >= base + width ? int(l) : int(l + b);
        case __SG_W_XOR: return (l ^ b) < base + width ? int(l ^ b) : int(l);
        default: return -1;
    }
}

// The bits of the arrived lanes whose value (wval) is non-zero (`same` false), or equals `v`.
static unsigned lanes_holding(const Fiber *lanes, unsigned arrived, bool same, uint64_t v) {
    unsigned bits = 0;
    for (unsigned k = 0; k < 32; ++k)
        if ((arrived >> k & 1) && (same ? lanes[k].wval == v : lanes[k].wval != 0)) bits |= 1u << k;
    return bits;
}

// One step of a __reduce_*_sync: acc combined with v (`sgn`: min and max of signed values).
static uint32_t reduce_step(int op, bool sgn, uint32_t acc, uint32_t v) {
    switch (op) {
        case __SG_W_RADD: return acc + v;
        case __SG_W_RAND: return acc & v;
        case __SG_W_ROR: return acc | v;
        case __SG_W_RXOR: return acc ^ v;
        case __SG_W_RMIN: return sgn ? (int32_t(v) < int32_t(acc) ? v : acc) : std::min(v, acc);
        default: return sgn ? (int32_t(v) > int32_t(acc) ? v : acc) : std::max(v, acc);
    }
}

// A __reduce_*_sync over the arrived lanes' values.
static uint32_t reduce_lanes(int op, bool sgn, const Fiber *lanes, unsigned arrived) {
    bool first = true;
    uint32_t acc = 0;
    for (unsigned k = 0; k < 32; ++k) {
        if (!(arrived >> k & 1)) continue;
        uint32_t v = uint32_t(lanes[k].wval);
        acc = first ? v : reduce_step(op, sgn, acc, v);
        first = false;
    }
    return acc;
}

// The result of a vote, reduction or match for lane f of the rendezvous g (arrived: its lanes).
static uint64_t collective_result(const WarpGroup &g, const Fiber *lanes, unsigned arrived, const Fiber &f) {
    switch (g.op) {
        case __SG_W_BALLOT: return lanes_holding(lanes, arrived, false, 0);
        case __SG_W_ANY: return lanes_holding(lanes, arrived, false, 0) != 0;
        case __SG_W_ALL: return lanes_holding(lanes, arrived, false, 0) == arrived;
        case __SG_W_RADD:
        case __SG_W_RMIN:
        case __SG_W_RMAX:
        case __SG_W_RAND:
        case __SG_W_ROR:
        case __SG_W_RXOR: return reduce_lanes(g.op, f.warg == 1, lanes, arrived);
        case __SG_W_MATCH_ANY: return lanes_holding(lanes, arrived, true, f.wval);
        case __SG_W_MATCH_ALL:  // the lanes, when all hold one value; else 0
            return lanes_holding(lanes, arrived, true, f.wval) == arrived ? arrived : 0;
        default: return 0;
    }
}

// Every arrived lane of warp wi gets its result (res), and those but `self` become runnable (next round).
static void deliver_warp_results(Block *B, unsigned wi, WarpGroup &g, const uint64_t *res, Fiber *self) {
    Fiber *lanes = &B->fibers[wi * 32];
    Warp &W = B->warps[wi];
    ++W.serial;
    for (unsigned l = 0; l < 32; ++l) {
        if (!(g.arrived >> l & 1)) continue;
        Fiber &f = lanes[l];
        f.wres = res[l];
        f.wserial = W.serial;
        if (&f != self) {
            f.state = kRunnable;
            B->next.push_back(f.linear);
        }
    }
    g.used = false;
    B->progress = true;
}

// Completes a rendezvous: results for every arrived lane; the others become runnable (next round).
// Returns what was wrong (false when fine). `self` (the last lane to arrive, or null) continues.
WarpError complete_warp(Block *B, unsigned wi, WarpGroup &g, Fiber *self) {
    Fiber *lanes = &B->fibers[wi * 32];
    unsigned arrived = g.arrived;
    uint64_t res[32];
    for (unsigned l = 0; l < 32; ++l) {
        if (!(arrived >> l & 1)) continue;
        const Fiber &f = lanes[l];
        int src = shuffle_source(g.op, l, unsigned(g.width), f.warg);
        if (src < 0) {
            res[l] = collective_result(g, lanes, arrived, f);
            continue;
        }
        if (!(arrived >> src & 1))
            return WarpError{Kind::barrier_divergence,
                             format("%s at %s:%d: lane %u reads lane %d, which is not in the mask 0x%08x (or has "
                                    "exited)", warp_op_name(g.op), g.file, g.line, l, src, g.mask)};
        res[l] = lanes[src].wval;
    }
    deliver_warp_results(B, wi, g, res, self);
    return WarpError{};
}

}  // namespace sg::rt
