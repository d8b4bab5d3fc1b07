// The failure kinds the emulator's runtime can report: the one table of them in C++.
//
// A finding (make_finding), a thread's failure (Worker::fail, bad_access), a block's error
// (block_error) and a kernel error of the C ABI (set_kernel_error) each take a `Kind`, never a
// string, so a kind the runtime reports is a row here. Each row's string is the kind Python reads
// (sg_result.kind, a finding's first field) and must be a row of grader/core/kinds.py's KINDS, which
// gives its verdict: tests/core/test_kinds.py reads this list (one `SG_KIND(id, "name")` per line) and
// fails on a name KINDS lacks. Adding a kind to the runtime: a row
// here, a row in KINDS, and the site that reports it (docs/architecture.md, "How to add...").
//
// Part of the emulator runtime (util.h includes it).

#ifndef SG_KINDS_H
#define SG_KINDS_H

#define SG_KINDS(SG_KIND)                               \
    /* findings of the checks */                        \
    SG_KIND(race, "race")                               \
    SG_KIND(out_of_bounds, "out-of-bounds")             \
    SG_KIND(misaligned, "misaligned")                   \
    SG_KIND(uninitialized_read, "uninitialized-read")   \
    SG_KIND(stale_read, "stale-read")                   \
    /* barriers, warps and progress */                  \
    SG_KIND(barrier_divergence, "barrier-divergence")   \
    SG_KIND(deadlock, "deadlock")                       \
    SG_KIND(early_exit, "early-exit")                   \
    SG_KIND(warp_convergence, "warp-convergence")       \
    /* shifts */                                        \
    SG_KIND(shift_clamped, "shift-clamped")             \
    SG_KIND(undefined_shift, "undefined-shift")         \
    /* faults of the kernel */                          \
    SG_KIND(illegal_address, "illegal-address")         \
    SG_KIND(illegal_instruction, "illegal-instruction") \
    SG_KIND(stack_overflow, "stack-overflow")           \
    SG_KIND(division_by_zero, "division-by-zero")       \
    SG_KIND(device_assert, "assert")                    \
    SG_KIND(trap, "trap")                               \
    /* what the emulator refuses or cannot do */        \
    SG_KIND(shared_memory_limit, "shared-memory-limit") \
    SG_KIND(unsupported, "unsupported")                 \
    SG_KIND(internal, "internal")

namespace sg::rt {

// One failure kind of the runtime (a row of SG_KINDS).
enum class Kind : unsigned char {
#define SG_KIND_ID(id, name) id,
    SG_KINDS(SG_KIND_ID)
#undef SG_KIND_ID
};

constexpr const char *kKindNames[] = {
#define SG_KIND_NAME(id, name) name,
    SG_KINDS(SG_KIND_NAME)
#undef SG_KIND_NAME
};

// The kind's string, as Python reads it (a row of grader/core/kinds.py's KINDS).
constexpr const char *kind_name(Kind k) { return kKindNames[static_cast<unsigned>(k)]; }

}  // namespace sg::rt

#endif  // SG_KINDS_H
