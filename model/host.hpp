// The host half of a GPU server: CPU DRAM and CPU compute, for offloaded KV and CPU-side kernels.
#pragma once
#include <string>

#include "core/yaml_reader.hpp"

namespace kvsim {

struct HostSpec {
  std::string name, description;
  int sockets = 1, cores = 1;
  double dram_capacity_bytes = 0;
  double dram_bandwidth = 0;   // bytes/s, all sockets
  double fp32 = 0;             // FLOP/s, all cores (SIMD)
  double bf16 = 0;             // FLOP/s, all cores (matrix extensions); 0 = none
  int pcie_generation = 0, pcie_lanes = 0;  // 0 = not given
  // One core's clock when a single thread runs (the maximum turbo frequency), Hz; 0 = not given. The
  // rule that scales a per-call host cost measured on one host to another divides by it
  // (model/host_ops.hpp): dispatch and call overheads are single-threaded instruction streams.
  double clock_hz = 0;
  // The clock every core holds while all of them run (the all-core turbo), Hz; 0 = not given (then
  // clock_hz stands for it, and a plan that scales multi-threaded work says so). Multi-threaded host
  // work (a framework operator on every core) scales by this one, not by the single-core maximum.
  double all_core_clock_hz = 0;
  double all_core_or_single_clock() const { return all_core_clock_hz > 0 ? all_core_clock_hz : clock_hz; }
};

// The rule that carries a per-call host cost (a single-threaded instruction stream: dispatch, a call,
// a fork and join) from the host it was measured on to another: times scale by measured clock / target
// clock. 1 when either clock is not given (0).
inline double clock_time_scale(double measured_hz, double target_hz) {
  return measured_hz > 0 && target_hz > 0 ? measured_hz / target_hz : 1.0;
}

HostSpec load_host(YamlMap m);

}  // namespace kvsim
