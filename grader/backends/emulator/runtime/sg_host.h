/* scangrade CPU emulator: the C ABI between an emulated module's runtime and the executor.
 *
 * Included by runtime.cpp (which exports the sg_* functions of every module) and by executor.cpp
 * (the sandboxed process that loads a module and calls them for the grader). Not included into
 * the student's translation unit. Change a structure: bump SG_ABI_VERSION.
 */
#ifndef SCANGRADE_SG_HOST_H
#define SCANGRADE_SG_HOST_H

#include <stdint.h>

#define SG_ABI_VERSION 5

/* The most blocks a launch's checks may sample (sg_launch_config.sample). */
#define SG_MAX_SAMPLE 16

/* In a launch that runs its sampled blocks only (sample_mode 1: blocks independent of one another),
 * each block has this many of its accesses checked, and runs the rest as an unchecked block does.
 * The sample is there for what only a large n shows (an index past the last tile, an overflow);
 * every access is checked at every size up to the grader's checks_max_n. Without a bound, a block
 * that does the whole launch's work (one thread scanning everything) is checked access by access
 * at every size. Mirrored by grader.grading.case.run.SAMPLED_BLOCK_CHECKS. */
#define SG_SAMPLED_BLOCK_CHECKS (1u << 20)

struct sg_alloc {
    uint64_t base;
    uint64_t size;
    uint64_t lo, count;  // a labelled buffer: elements [lo, lo + count) are inside it, the rest is guard zone
    uint32_t elem;       // element bytes; 0: unlabelled (the whole allocation is inside)
    char name[32];       // the buffer's name (NUL-terminated)
};

struct sg_launch_config {
    const char *kernel;
    unsigned int grid[3];
    unsigned int block[3];
    uint64_t dyn_shared;    // dynamic shared memory, bytes
    uint64_t shared_limit;  // static + dynamic limit per block, bytes
    int workers;            // OS threads (>= 1)
    int schedule;           // 0 ascending, 1 descending, 2 random (linear thread ids)
    uint64_t seed;          // random schedule and block choice
    int checks;             // 1: check every memory access and barrier
    int detect_deadlock;    // 1: a deadlock is a KernelError; 0: wait (the grader's timeout)
    uint32_t shared_fill;   // what unwritten shared memory reads: this 32-bit word, repeated (little-endian)
    uint32_t interleave;    // in a checked block: the chance, out of 65536, that a thread switches to the next
                            // thread of its round before each plain load or store of shared or global memory
    int sample_mode;        // with checks: 0 every block runs, checked; 1 only the blocks in `sample` run
                            // (checked), the others are skipped; 2 every block runs, those in `sample` checked
    int nsample;            // blocks in `sample` (at most SG_MAX_SAMPLE)
    uint64_t sample[SG_MAX_SAMPLE];  // linear indices of the sampled blocks
    const sg_alloc *allocs; // device allocations (checks: global bounds)
    int nallocs;
};

enum { SG_OK = 0, SG_KERNEL_ERROR = 1, SG_LAUNCH_ERROR = 2, SG_INTERNAL_ERROR = 3 };

struct sg_result {
    int status;             // SG_OK, SG_KERNEL_ERROR, SG_LAUNCH_ERROR, SG_INTERNAL_ERROR
    int has_ids;            // block/thread below are meaningful
    unsigned int block[3];
    unsigned int thread[3];
    char kind[32];
    char message[2048];
    int nfindings;          // findings of the checks (sg_findings)
};

/* OS threads the host (the executor) started before it loaded the module: its seccomp filter then
 * refuses every new thread, so a launch runs its workers on these. start() runs fn(args[i]) for
 * i < n, each on a thread of its own, and returns how many it started (fewer when it has fewer
 * threads); wait() returns when all of them have returned. Given by sg_set_thread_pool() (optional:
 * without a pool the runtime starts its own threads per launch). */
struct sg_thread_pool {
    int (*start)(void (*fn)(void *), void *const *args, int n);
    void (*wait)(void);
};

/* The sg_* functions every module exports (runtime.cpp). */
typedef int (*sg_abi_version_fn)(void);
typedef int (*sg_kernel_count_fn)(void);
typedef const char *(*sg_kernel_name_fn)(int);
typedef int (*sg_kernel_defined_fn)(const char *);
typedef int (*sg_kernel_arity_fn)(const char *);
typedef void (*sg_trim_fn)(void);
typedef long (*sg_take_output_fn)(char *, long);
typedef long (*sg_findings_fn)(char *, long);
typedef int (*sg_launch_fn)(const sg_launch_config *, void *const *, int, sg_result *);
typedef void (*sg_set_thread_pool_fn)(const struct sg_thread_pool *);
/* The memory-access profile (runtime/profile/profile.h). */
typedef void (*sg_profile_set_fn)(int, unsigned long long);
typedef long (*sg_profile_take_fn)(char *, long);

#endif
