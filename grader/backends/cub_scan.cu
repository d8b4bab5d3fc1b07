// scangrade bench: CUB's DeviceScan::ExclusiveSum behind a C entry point, loaded with ctypes.
// Built by `scangrade bench` with nvcc into a shared library (cached under ~/.cache/scangrade/).
// Pointers are device addresses passed as integers (PyCUDA allocations of the current context);
// work is queued on the legacy default stream (stream 0), where the bench records its CUDA events.
#include <cstddef>
#include <cstdint>
#include <cub/device/device_scan.cuh>
#include <cuda_runtime.h>

template <typename T>
static int exclusive_sum(std::uintptr_t in, std::uintptr_t out, int n, std::uintptr_t temp,
                         std::size_t* temp_bytes) {
  cudaError_t err = cub::DeviceScan::ExclusiveSum(reinterpret_cast<void*>(temp), *temp_bytes,
                                                  reinterpret_cast<const T*>(in), reinterpret_cast<T*>(out), n,
                                                  static_cast<cudaStream_t>(0));
  return static_cast<int>(err);
}

extern "C" {

// dtype: 0 = int32, 1 = float32. With temp == 0, only writes the temp storage size (bytes) to
// *temp_bytes. Returns a cudaError_t (0 = success); -1 for an unknown dtype.
int scangrade_cub_exclusive_sum(std::uintptr_t in, std::uintptr_t out, int n, std::uintptr_t temp,
                                std::size_t* temp_bytes, int dtype) {
  switch (dtype) {
    case 0: return exclusive_sum<int>(in, out, n, temp, temp_bytes);
    case 1: return exclusive_sum<float>(in, out, n, temp, temp_bytes);
    default: return -1;
  }
}

// CUB_VERSION (e.g. 300001 for CCCL 3.0.1).
int scangrade_cub_version(void) { return CUB_VERSION; }

const char* scangrade_cuda_error(int code) { return cudaGetErrorString(static_cast<cudaError_t>(code)); }

}  // extern "C"
