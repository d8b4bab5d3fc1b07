// scangrade CPU emulator runtime: runs CUDA kernels on the CPU, CUDA threads as fibers.
//
// Compiled once per (sources, flags, compiler) into an object file and linked into every emulated
// module, with hidden visibility except the sg_* C ABI (host/abi.cpp, sg_host.h), which the executor
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
//   * Progress, by proof (block/loops.cpp): a round is stale when its yields repeat the threads' recent
//     (site, address, value), nothing was stored and every yielded thread is back in the state of its
//     previous yield; when every resident block of every worker is stale, the launch deadlocks. A
//     block whose state at a barrier release repeats an earlier one loops for ever. Both are
//     reported when deadlock detection is on; otherwise the launch waits for the grader's timeout,
//     as a GPU would hang.
//   * Memory hooks: modules are compiled with -fsanitize=thread, and this runtime defines the
//     __tsan_* entry points (no sanitizer runtime is linked). Volatile accesses are yield points;
//     with checks on, every access of a checked block (every block, or the sampled ones: sg_host.h,
//     sample_mode) is checked (bounds, alignment, races, uninitialised shared), and the random
//     order may switch threads before plain accesses (memory/access.h, interleave).
//   * Errors end the block; the launch reports the failure of the lowest failing block.
//   * The runtime never times out on its own: the grader runs emulated code in a child process.

// The runtime by level, as its folders are laid out:
//   grid/     the launch, its workers and their loop, the kernel registry, schedules, faults, output
//   block/    fibers and their contexts, rounds, barriers, endless loops and deadlocks
//   warp/     warp rendezvous (shuffles, votes, reductions, matches) and __activemask()
//   memory/   the memory hooks, the access path, atomics, the shadow and the stores' records
//   checks/   findings; bounds, races, uninitialised shared memory, the memory model's order
//   profile/  the memory-access profile (bank conflicts, sectors per request)
//   host/     the sg_* C ABI for the executor (sg_host.h)
// Each folder's headers compile alone (tests/backends/test_runtime_sources.py); each .cpp is compiled once,
// by one of several compiles run at once (build.py, EmulatorToolchain.runtime_steps: a .cpp a compile where
// there are cores enough, the objects joined, the names of sg::rt made local).
//
// This file is the runtime in one translation unit (build.py's plain compile, where the build in
// several compiles is not possible): every unit once, and sg::rt a member of an unnamed namespace,
// so that every name of the runtime but its C ABI has internal linkage.
namespace sg {
inline namespace {
namespace rt {}
}  // namespace
}  // namespace sg

#include "block/barrier.cpp"
#include "block/context.cpp"
#include "block/deadlock.cpp"
#include "block/device.cpp"
#include "block/loops.cpp"
#include "block/rounds.cpp"
#include "checks/access.cpp"
#include "checks/bounds.cpp"
#include "checks/order.cpp"
#include "checks/races.cpp"
#include "grid/worker.cpp"
#include "host/abi.cpp"
#include "memory/atomics.cpp"
#include "memory/hooks.cpp"
#include "profile/profile.cpp"
#include "warp/activemask.cpp"
#include "warp/device.cpp"
#include "warp/rendezvous.cpp"
