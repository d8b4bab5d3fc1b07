// The runtime, grid level: device printf output and a launch's result (sg_result).
#pragma once

#include "util.h"

namespace sg::rt {

// ---------------------------------------------------------------------------------------------
// Device printf output and launch results (sg_result).
// ---------------------------------------------------------------------------------------------
// Device printf output, kept until Python takes it.
constexpr size_t kOutputCap = 64 * 1024;
inline std::mutex g_out_mu;
inline std::string g_out;
inline bool g_out_cut = false;

inline void append_output(const char *s, size_t n) {
    std::lock_guard<std::mutex> lock(g_out_mu);
    if (g_out.size() + n > kOutputCap) {
        n = g_out.size() < kOutputCap ? kOutputCap - g_out.size() : 0;
        g_out_cut = true;
    }
    g_out.append(s, n);
}

inline void copy_str(char *dst, size_t cap, const std::string &s) {
    size_t n = std::min(cap - 1, s.size());
    std::memcpy(dst, s.data(), n);
    dst[n] = '\0';
}

inline void set_result(sg_result *r, int status, const char *kind, const std::string &msg) {
    r->status = status;
    r->has_ids = 0;
    copy_str(r->kind, sizeof r->kind, kind);
    copy_str(r->message, sizeof r->message, msg);
}

// The kernel failed: `kind` is its failure kind (a row of sg_kinds.h).
inline void set_kernel_error(sg_result *r, Kind kind, const std::string &msg) {
    set_result(r, SG_KERNEL_ERROR, kind_name(kind), msg);
}

// The launch was refused before the kernel ran (Python raises LaunchError): `reason` is no failure
// kind ("configuration", "arguments", "unknown-kernel"), only a word for whoever debugs the ABI.
inline void set_launch_error(sg_result *r, const char *reason, const std::string &msg) {
    set_result(r, SG_LAUNCH_ERROR, reason, msg);
}

}  // namespace sg::rt
