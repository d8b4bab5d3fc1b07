// scangrade CPU emulator runtime: runs CUDA kernels on the CPU, CUDA threads as fibers.
//
// Compiled once per (sources, flags, compiler) into an object file and linked into every emulated
// module, with hidden visibility except the sg_* C ABI (rt_abi.inc, sg_host.h), which the executor
// calls (executor.cpp: the sandboxed process that loads the module for the grader).
//
// Execution model
//   * A launch spreads its blocks over `workers` OS threads (the caller is worker 0). Each worker
//     keeps up to kResident blocks resident at once, each in a slot with its own fibers (one per
//     CUDA thread) and its own shared-memory arena; slots persist across launches (sg_trim frees).
//   * A block runs in rounds: every runnable thread runs, in the schedule's order, until it blocks
//     (barrier, warp rendezvous), yields (atomic, volatile access, fence, __nanosleep) or returns; a
//     thread switches directly to the next one of the round, the last one back to the scheduler.
//     A barrier releases when every live thread waits at it; a warp rendezvous completes when every
//     lane of its mask arrived.
//   * After a round that ended at barriers only, the same block continues (the fast path). After a
//     round with a yield, the worker admits another block if it has a free slot and picks the next
//     block to run at random (seeded), so spin-waits on other blocks (decoupled look-back) progress
//     and see partial results.
//   * Progress, by proof (rt_blocks.inc): a round is stale when its yields repeat the threads' recent
//     (site, address, value), nothing was stored and every yielded thread is back in the state of its
//     previous yield; when every resident block of every worker is stale, the launch deadlocks. A
//     block whose state at a barrier release repeats an earlier one loops for ever. Both are
//     reported when deadlock detection is on; otherwise the launch waits for the grader's timeout,
//     as a GPU would hang.
//   * Memory hooks: modules are compiled with -fsanitize=thread, and this runtime defines the
//     __tsan_* entry points (no sanitizer runtime is linked). Volatile accesses are yield points;
//     with checks on, every access of a checked block (every block, or the sampled ones: sg_host.h,
//     sample_mode) is checked (bounds, alignment, races, uninitialised shared), and the random
//     order may switch threads before plain accesses (rt_checks.inc, interleave).
//   * Errors end the block; the launch reports the failure of the lowest failing block.
//   * The runtime never times out on its own: the grader runs emulated code in a child process.

#include "sg_abi.h"

#include <dlfcn.h>
#include <link.h>
#include <signal.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <chrono>
#include <thread>
#include <unordered_map>
#include <vector>

#if !defined(__x86_64__) || defined(SG_USE_UCONTEXT)
#define SG_UCONTEXT 1
#include <ucontext.h>
#endif

#define SG_EXPORT extern "C" __attribute__((visibility("default")))
#define SG_HOOK extern "C" __attribute__((visibility("hidden")))

// The runtime's pieces: how its definitions are divided between the objects of a build in
// several compiles at once (build.py, Toolchain.runtime_steps). Compiled without SG_RT_PIECES, this
// file is one translation unit with every piece, its names internal (an unnamed namespace). With
// -DSG_RT_PIECES=<mask> it defines only the pieces of that mask: the types, constants, inline
// functions and inline variables every piece shares, and the other pieces' functions declared
// only; its names then live in the namespace sg::sg_rt_split, which the build makes local again
// (objcopy) once it has linked the pieces' objects into one, so that the object names no more
// than the one translation unit does. Each section below says which piece its functions are in.
#define SG_RT_PIECE_COUNT 6
#define SG_IN_HOOKS (SG_RT_PIECES & 1)     // rt_hooks.inc, rt_device.inc: the module's entry points
#define SG_IN_WORKER (SG_RT_PIECES & 2)    // rt_worker.inc and the fiber switch: a worker's loop
#define SG_IN_CHECKS (SG_RT_PIECES & 4)    // rt_checks.inc: the checks of every access
#define SG_IN_HOST (SG_RT_PIECES & 8)      // rt_abi.inc: the executor's C ABI
#define SG_IN_PROFILE (SG_RT_PIECES & 16)  // profile.inc: the memory-access profile
#define SG_IN_BLOCKS (SG_RT_PIECES & 32)   // rt_blocks.inc: rounds, barriers, warps, deadlock
#ifdef SG_RT_PIECES
#define SG_RT_NS sg_rt_split
namespace sg {
namespace sg_rt_split {}
using namespace sg_rt_split;
}  // namespace sg
#else
#define SG_RT_PIECES ((1 << SG_RT_PIECE_COUNT) - 1)
#define SG_RT_NS
#endif

// The C ABI structures (sg_host.h, shared with the executor).
#include "sg_host.h"
// The failure kinds the runtime reports (sg_kinds.h: the one table of them, read by tests/core/test_kinds.py).
#include "sg_kinds.h"

namespace sg {
namespace SG_RT_NS {

// The sections, #included in order; build.py hashes every file of runtime/ into the object's cache key.
#include "rt_context.inc"   // contexts: x86-64 switch or ucontext
#include "rt_registry.inc"  // kernel registry
#include "rt_schedule.inc"  // schedules (thread orders of a round)
#include "rt_launch.inc"    // fibers, blocks, workers, the launch, globals
#include "profile.inc"      // the memory-access profile (bank conflicts, sectors per request)
#include "rt_findings.inc"  // findings (checks) and failures
#include "rt_blocks.inc"    // rounds, barriers, warp rendezvous, stuck blocks, deadlock
#include "rt_faults.inc"    // fault handlers (SIGSEGV, SIGBUS, SIGFPE, SIGILL)
#include "rt_worker.inc"    // a worker's loop over the launch's blocks
#include "rt_output.inc"    // device printf buffer, results
#include "rt_checks.inc"    // yield points and the checks of every memory access

}  // namespace SG_RT_NS
}  // namespace sg

using namespace sg;

#if SG_IN_HOOKS
#include "rt_device.inc"    // device-side entry points (extern "C", hidden), device printf
#include "rt_hooks.inc"     // -fsanitize=thread / shift-exponent hooks
#endif
#if SG_IN_HOST
#include "rt_abi.inc"       // the sg_* C ABI for the executor (sg_host.h)
#endif
