// The runtime's base: the system headers, the ABI it shares with compiled kernels (sg_abi.h) and
// with the executor (sg_host.h), its failure kinds (sg_kinds.h), its limits and its helpers.
//
// Every name of the runtime is in namespace sg::rt. Built from its level folders in several
// compiles at once (build.py, EmulatorToolchain.runtime_steps), the objects are joined and the names of
// sg::rt made local (objcopy); built in one compile (runtime.cpp), sg::rt is a member of an
// unnamed namespace. Either way no module can bind a name of the runtime's state (lockdown.py).
#pragma once

#include <dlfcn.h>
#include <link.h>
#include <signal.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "sg_abi.h"
#include "sg_host.h"
#include "sg_kinds.h"

#if !defined(__x86_64__) || defined(SG_USE_UCONTEXT)
#define SG_UCONTEXT 1
#include <ucontext.h>
#endif

#define SG_EXPORT extern "C" __attribute__((visibility("default")))
#define SG_HOOK extern "C" __attribute__((visibility("hidden")))

namespace sg::rt {

// ---------------------------------------------------------------------------------------------
// Limits.
// ---------------------------------------------------------------------------------------------
constexpr size_t kStack = __SG_STACK_SIZE;
constexpr size_t kHeader = __SG_HEADER_SIZE;
constexpr unsigned kMaxThreads = 1024;
constexpr unsigned char kPoison = 0xA5;  // the red zones' bytes (shared arrays get the launch's fill)
constexpr size_t kAltStack = 64 * 1024;
constexpr unsigned kResident = 4;  // blocks resident per worker
constexpr unsigned kSigs = 4;      // recent yield signatures per thread (stale-poll detection)
constexpr unsigned kMaxFindings = 256;
constexpr unsigned kUninitPcs = 16;  // code addresses per block whose uninitialised reads were reported
constexpr size_t kRedZone = 256;   // poisoned bytes before, between and after shared arrays (not counted)
constexpr unsigned kJumps = 8;
constexpr unsigned kSnapChunk = 4096, kSnapChunks = 1024;  // views snapshotted per launch: chunks of them
constexpr unsigned kObs = 4;       // stores of other blocks a thread remembers having read (memory order)     // jump statements kept per thread since the last barrier it passed

inline bool same_file(const char *a, const char *b) { return a == b || (a && b && !std::strcmp(a, b)); }

// Formats like printf into a std::string.
inline std::string format(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
inline std::string format(const char *fmt, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = std::vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n < 0) return std::string();
    if (size_t(n) < sizeof buf) return std::string(buf, size_t(n));
    std::string s(size_t(n) + 1, '\0');
    va_start(ap, fmt);
    std::vsnprintf(&s[0], s.size(), fmt, ap);
    va_end(ap);
    s.resize(size_t(n));
    return s;
}

}  // namespace sg::rt
