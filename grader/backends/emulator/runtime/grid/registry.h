// The runtime, grid level: the kernels of the module (filled by static initialisers appended to the
// emulated file, __sg_register_kernel).
#pragma once

#include "util.h"

namespace sg::rt {

// ---------------------------------------------------------------------------------------------
// Kernel registry (filled by static initialisers appended to the emulated file).
// ---------------------------------------------------------------------------------------------
struct Kernel {
    const char *name;
    void *fn;  // null when the contract kernel is not defined (weak reference)
    __sg_invoke_fn invoke;
    int nargs;
};

constexpr int kMaxKernels = 64;
inline Kernel g_kernels[kMaxKernels];
inline int g_nkernels = 0;

inline const Kernel *find_kernel(const char *name) {
    for (int i = 0; i < g_nkernels; ++i)
        if (std::strcmp(g_kernels[i].name, name) == 0) return &g_kernels[i];
    return nullptr;
}

}  // namespace sg::rt
