/* scangrade CPU emulator: stub cuda.h (driver API types only; nothing is emulated here). */
#pragma once
#ifndef CUDA_VERSION
/* The toolkit's version, as nvcc's headers give it: the compile predefines nvcc's version macros
 * (grader/backends/emulator/macros.py). */
#define CUDA_VERSION (__CUDA_API_VER_MAJOR__ * 1000 + __CUDA_API_VER_MINOR__ * 10)
#endif
typedef int CUresult;
typedef int CUdevice;
