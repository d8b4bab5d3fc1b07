/* scangrade CPU emulator: stub cuda.h (driver API types only; nothing is emulated here). */
#pragma once
#ifndef CUDA_VERSION
#define CUDA_VERSION 12000
#endif
typedef int CUresult;
typedef int CUdevice;
