// Block- and warp-level synchronization under the emulator. The call site is part of a barrier: all
// threads of a block must wait at the same __syncthreads (CUDA: "allowed in conditional code only if
// the condition evaluates identically across the entire thread block"), and the block runner reports a
// divergent one instead of guessing. Fences order nothing here: threads of a launch run one at a time
// on one OS thread, so every write is already visible to every later read (stronger than a GPU); the
// access checker notes them.
#pragma once
#include <source_location>

#include "kernels/emu/block_runner.hpp"
#include "kernels/emu/checker.hpp"

inline void __syncthreads(std::source_location site = std::source_location::current()) {
  kvsim::emu::block_barrier(site);
}
inline void __syncwarp(unsigned mask = 0xffffffffu, std::source_location site = std::source_location::current()) {
  kvsim::emu::warp_collective(kvsim::emu::WarpOp::sync, mask, 0, 0, 32, site);
}
// __threadfence matters to the access checker: a block that fenced after its stores may hand them to
// another block through an atomic (kernels/emu/checker.hpp).
inline void __threadfence_block() {}
inline void __threadfence() { KVSIM_EMU_CHECK_FENCE(); }
inline void __threadfence_system() { KVSIM_EMU_CHECK_FENCE(); }
