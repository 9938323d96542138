// Warp collectives under the emulator: each lane hands its value to the block runner and waits; when all
// lanes named in the mask have arrived at the same collective, the runner computes every lane's result
// as the hardware does (kernels/emu/block_runner.cpp) and lets them go on. One overload per type CUDA
// provides, so a call resolves (and converts its argument) as it does under nvcc; any other type is a
// compile error. A lane outside its own mask, a mask naming lanes that are not there, reading a lane
// outside the mask, or lanes that never meet are run-time errors (undefined on a GPU).
#pragma once
#include <cstdint>
#include <cstring>
#include <source_location>

#include "kernels/emu/block_runner.hpp"
#include "kernels/emu/thread_context.hpp"

namespace kvsim::emu::detail {
template <class T>
uint64_t to_bits(T v) {
  static_assert(sizeof(T) <= sizeof(uint64_t));
  uint64_t b = 0;
  std::memcpy(&b, &v, sizeof v);
  return b;
}
template <class T>
T from_bits(uint64_t b) {
  T v;
  std::memcpy(&v, &b, sizeof v);
  return v;
}
template <class T>
T shuffle(WarpOp op, unsigned mask, T var, int arg, int width, const std::source_location& site) {
  return from_bits<T>(warp_collective(op, mask, to_bits(var), arg, width, site));
}
}  // namespace kvsim::emu::detail

#define KVSIM_EMU_SHUFFLES(T)                                                                                 \
  inline T __shfl_sync(unsigned mask, T var, int src_lane, int width = warpSize,                             \
                       std::source_location site = std::source_location::current()) {                        \
    return kvsim::emu::detail::shuffle(kvsim::emu::WarpOp::shfl_idx, mask, var, src_lane, width, site);      \
  }                                                                                                           \
  inline T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = warpSize,                        \
                          std::source_location site = std::source_location::current()) {                     \
    return kvsim::emu::detail::shuffle(kvsim::emu::WarpOp::shfl_up, mask, var, int(delta), width, site);     \
  }                                                                                                           \
  inline T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = warpSize,                      \
                            std::source_location site = std::source_location::current()) {                   \
    return kvsim::emu::detail::shuffle(kvsim::emu::WarpOp::shfl_down, mask, var, int(delta), width, site);   \
  }                                                                                                           \
  inline T __shfl_xor_sync(unsigned mask, T var, int lane_mask, int width = warpSize,                        \
                           std::source_location site = std::source_location::current()) {                    \
    return kvsim::emu::detail::shuffle(kvsim::emu::WarpOp::shfl_xor, mask, var, lane_mask, width, site);     \
  }
KVSIM_EMU_SHUFFLES(int)
KVSIM_EMU_SHUFFLES(unsigned)
KVSIM_EMU_SHUFFLES(long)
KVSIM_EMU_SHUFFLES(unsigned long)
KVSIM_EMU_SHUFFLES(long long)
KVSIM_EMU_SHUFFLES(unsigned long long)
KVSIM_EMU_SHUFFLES(float)
KVSIM_EMU_SHUFFLES(double)
#undef KVSIM_EMU_SHUFFLES

inline unsigned __ballot_sync(unsigned mask, int predicate,
                              std::source_location site = std::source_location::current()) {
  return unsigned(kvsim::emu::warp_collective(kvsim::emu::WarpOp::ballot, mask, predicate != 0, 0, 32, site));
}
inline int __any_sync(unsigned mask, int predicate, std::source_location site = std::source_location::current()) {
  return int(kvsim::emu::warp_collective(kvsim::emu::WarpOp::any, mask, predicate != 0, 0, 32, site));
}
inline int __all_sync(unsigned mask, int predicate, std::source_location site = std::source_location::current()) {
  return int(kvsim::emu::warp_collective(kvsim::emu::WarpOp::all, mask, predicate != 0, 0, 32, site));
}
// The emulator has no notion of reconvergence, so __activemask is a meeting of every lane of the warp
// that has not exited, at this call site; in divergent code the lanes never all arrive and the block
// runner reports it rather than returning a mask a GPU might not.
inline unsigned __activemask(std::source_location site = std::source_location::current()) {
  return unsigned(kvsim::emu::warp_collective(kvsim::emu::WarpOp::activemask, 0, 0, 0, 32, site));
}
