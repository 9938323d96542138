// Runs a kernel's grid on the calling OS thread: blocks one after another, and within a block one fiber
// per GPU thread (each with its own stack, kernels/emu/stack_pool.hpp), switched round-robin. A thread
// runs until it finishes or reaches a barrier or a warp collective; when no thread can run, the runner
// releases what is complete (a warp collective whose named lanes have all arrived, then a
// __syncthreads that every thread of the block has reached) and goes round again. When nothing can be
// released the block would hang on a GPU: the runner throws kvsim::emu::Error saying who waits where.
//
// Rounds alternate their direction (thread 0 first, then the last thread first), so a missing barrier
// shows up whichever side of a shared-memory exchange reads too early.
#pragma once
#include <cstddef>
#include <cstdint>
#include <source_location>
#include <string>

#include "kernels/emu/runtime.hpp"
#include "kernels/emu/vector_types.hpp"

namespace kvsim::emu {

struct LaunchConfig {
  dim3 grid, block;
  size_t shared_bytes = 0;  // dynamic shared memory per block
  cudaStream_t stream = nullptr;
  LaunchConfig(dim3 g, dim3 b, size_t smem = 0, cudaStream_t s = nullptr)
      : grid(g), block(b), shared_bytes(smem), stream(s) {}
};

// CUDA's limits for a launch (compute capability 9.0 without opt-ins): a launch outside them records
// cudaErrorInvalidConfiguration and runs nothing, as on a GPU.
inline constexpr unsigned kMaxThreadsPerBlock = 1024;
inline constexpr size_t kMaxDynamicSharedBytes = 48 * 1024;

// The kernel with its arguments bound, called once per GPU thread (kernels/emu/launch.hpp).
using KernelEntry = void (*)(const void* bound);

// Runs the whole grid before returning. Throws Error on a hang or an unsupported operation, and
// rethrows whatever a kernel thread threw.
void run_grid(const char* kernel, const LaunchConfig& cfg, KernelEntry entry, const void* bound);

// ---- called from kernel code (kernels/emu/barrier.hpp, kernels/emu/warp.hpp) ----
enum class WarpOp : uint8_t { sync, shfl_idx, shfl_up, shfl_down, shfl_xor, ballot, any, all, activemask };

// The calling thread waits until every thread of its block waits at the same call site.
void block_barrier(const std::source_location& site);

// A debugging hook for proving that the checker catches a missing barrier without rebuilding: from now
// on the __syncthreads calls at `line` of a file whose name ends with `file_suffix` return at once, as
// if that line were deleted (line 0 restores every barrier). Process-wide; not for concurrent use.
void skip_barrier_at(const std::string& file_suffix, unsigned line);
// The calling lane exchanges `value` with the lanes of `mask` (its warp's lanes, bit i = lane i), which
// must all make the same call: returns the lane's result (the shuffled value as raw bits, a ballot
// mask, an any / all flag, the active mask). `arg` is the shuffle's source lane, delta or lane mask.
uint64_t warp_collective(WarpOp op, unsigned mask, uint64_t value, int arg, int width,
                         const std::source_location& site);

}  // namespace kvsim::emu
