/* scangrade CPU emulator: stub cuda_runtime_api.h (types only; host API calls are not emulated). */
#pragma once
#ifndef CUDART_VERSION
#define CUDART_VERSION 12000
#endif
typedef enum cudaError { cudaSuccess = 0, cudaErrorInvalidValue = 1, cudaErrorMemoryAllocation = 2 } cudaError_t;
typedef struct CUstream_st *cudaStream_t;
typedef struct CUevent_st *cudaEvent_t;
