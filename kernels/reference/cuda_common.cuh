// Shared by the reference .cu files: which build of them this is, how they launch, error checks.
#pragma once
#include <cuda_runtime.h>  // under the emulator, kernels/emu/include/cuda_runtime.h: the whole emulator

#include <stdexcept>
#include <string>

#include "kernels/cuda_launch.cuh"

// The namespace of this build's launchers (kernels/reference/cuda.hpp): the emulated build must not
// define the same symbols as the nvcc one, since a binary may link both.
#if defined(KVSIM_CUDA_EMU)
#define KVSIM_CUDA_BACKEND cuda_emu
#else
#define KVSIM_CUDA_BACKEND cuda
#endif

namespace kvsim::ref::KVSIM_CUDA_BACKEND::detail {
inline void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string("CUDA ") + what + ": " + cudaGetErrorString(e));
}
// After a launch: the launch error, then the kernel's own (synchronizing).
inline void check_launch(const char* what) {
  check(cudaGetLastError(), what);
  check(cudaDeviceSynchronize(), what);
}
inline unsigned blocks_for(int64_t n, int threads) { return unsigned((n + threads - 1) / threads); }
}  // namespace kvsim::ref::KVSIM_CUDA_BACKEND::detail
