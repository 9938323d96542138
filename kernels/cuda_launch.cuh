// How a .cu file launches a kernel and declares dynamic shared memory, written once for both compilers
// of kvsim's CUDA sources: nvcc (the real GPU build) and the C++ compiler through the CUDA emulator
// (kernels/emu, kernels/README.md), for which `<<<...>>>` is not C++.
//
//   KVSIM_LAUNCH(kernel, grid, block[, shared_bytes[, stream]])(args...);
//   KVSIM_DYNAMIC_SHARED(float, tile);  // in a kernel: float* tile, the launch's shared_bytes
//
// A kernel named with template arguments that contain a comma goes in parentheses:
// KVSIM_LAUNCH((k<A, B>), grid, block)(args...).
//
//   KVSIM_UNROLL for (...)  // `#pragma unroll` under nvcc: a loop over a register array must be unrolled
//                           // or the array goes to local memory; nothing for the emulator's compiler
//                           // (which warns on the unknown pragma and needs no unrolling).
#pragma once

#if defined(__CUDACC__)
#define KVSIM_LAUNCH(kernel, ...) kernel<<<__VA_ARGS__>>>
#define KVSIM_UNROLL _Pragma("unroll")
// One raw byte array for every kernel of a file (CUDA requires one type per extern __shared__ name).
#define KVSIM_DYNAMIC_SHARED(T, name)                                         \
  extern __shared__ __align__(16) unsigned char kvsim_dynamic_shared_bytes[]; \
  T* const name = reinterpret_cast<T*>(kvsim_dynamic_shared_bytes)
#elif defined(KVSIM_CUDA_EMU)
#include "kernels/emu/launch.hpp"
#define KVSIM_LAUNCH(kernel, ...) KVSIM_EMU_LAUNCH(kernel, __VA_ARGS__)
#define KVSIM_UNROLL
#define KVSIM_DYNAMIC_SHARED(T, name) T* const name = ::kvsim::emu::dynamic_shared<T>()
#else
#error "kernels/cuda_launch.cuh: compile with nvcc, or include kernels/emu/cuda.hpp (the CUDA emulator) first"
#endif
