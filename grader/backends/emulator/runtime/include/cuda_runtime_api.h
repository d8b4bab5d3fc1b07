/* scangrade CPU emulator: stub cuda_runtime_api.h (types only; host API calls are not emulated). */
#pragma once
#ifndef CUDART_VERSION
/* The toolkit's version, as nvcc's headers give it: the compile predefines nvcc's version macros
 * (grader/backends/emulator/macros.py). */
#define CUDART_VERSION (__CUDA_API_VER_MAJOR__ * 1000 + __CUDA_API_VER_MINOR__ * 10)
#endif
typedef enum cudaError { cudaSuccess = 0, cudaErrorInvalidValue = 1, cudaErrorMemoryAllocation = 2 } cudaError_t;
typedef struct CUstream_st *cudaStream_t;
typedef struct CUevent_st *cudaEvent_t;
