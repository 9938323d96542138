// Which emulated GPU thread is running on this OS thread right now: the values behind threadIdx,
// blockIdx, blockDim and gridDim. The block runner (block_runner.cpp) writes them before it switches to
// a thread's fiber; kernels read them through the macros below, which yield const references so that a
// kernel cannot assign to them (as on the GPU). Outside a kernel `lane` is null.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/emu/vector_types.hpp"

namespace kvsim::emu {

struct Lane;  // one emulated GPU thread (block_runner.hpp)

struct ThreadContext {
  uint3 thread_idx{0, 0, 0};
  uint3 block_idx{0, 0, 0};
  dim3 block_dim{};
  dim3 grid_dim{};
  unsigned char* dynamic_smem = nullptr;  // this launch's dynamic shared memory (null when none)
  size_t dynamic_smem_bytes = 0;
  Lane* lane = nullptr;
  // The running thread's linear index in its block and its fiber's stack (the access checker ignores
  // accesses to a thread's own stack: local memory).
  unsigned linear = 0;
  uintptr_t stack_lo = 0, stack_hi = 0;
};

// thread_local: two host threads may each run a launch at the same time, with their own fibers.
inline thread_local ThreadContext tls_thread{};

}  // namespace kvsim::emu

#define threadIdx (static_cast<const uint3&>(::kvsim::emu::tls_thread.thread_idx))
#define blockIdx (static_cast<const uint3&>(::kvsim::emu::tls_thread.block_idx))
#define blockDim (static_cast<const dim3&>(::kvsim::emu::tls_thread.block_dim))
#define gridDim (static_cast<const dim3&>(::kvsim::emu::tls_thread.grid_dim))
inline constexpr int warpSize = 32;
