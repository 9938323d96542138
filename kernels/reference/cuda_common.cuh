// Shared by the reference .cu files: error checks.
#pragma once
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace kvsim::ref::cuda::detail {
inline void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string("CUDA ") + what + ": " + cudaGetErrorString(e));
}
// After a launch: the launch error, then the kernel's own (synchronizing).
inline void check_launch(const char* what) {
  check(cudaGetLastError(), what);
  check(cudaDeviceSynchronize(), what);
}
inline unsigned blocks_for(int64_t n, int threads) { return unsigned((n + threads - 1) / threads); }
}  // namespace kvsim::ref::cuda::detail
