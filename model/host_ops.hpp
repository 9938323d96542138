// Host phases run as framework operators: a host implementation profile. A policy whose paper runs its
// CPU side with a framework's stock operators (PyTorch on the CPU, say) instead of native kernels pays
// what those operators cost: a fixed time per layer however little it moves (Python and ATen dispatch,
// allocation, intra-op parallel regions over a dozen operators) and a per-thread data rate that is far
// below the host's DRAM bandwidth (element-wise gathers, small matmuls, softmax and top-k).
//
// The profile is measured on one host (tools/measure/torch_host_ops.py runs the operator sequence that
// policies/<name>/torch_cpu.py writes down, at the phase's shapes) and scaled to the target host by one
// stated rule (docs/cost-model.md, "Host phases as framework operators"):
//   fixed   = fixed_measured x clock_measured / clock_target        (single-threaded instruction streams)
//   rate(x) = min(target DRAM bandwidth,
//                 target cores x rate_per_thread_measured(x) x clock_target / clock_measured)
// where x is the bytes one layer's phase moves (the bytes the cost model charges it on DRAM) and the
// per-thread rate is interpolated in log x between the measured points (the end value outside). A
// clock missing on either host leaves the clock ratio at 1, and the plan says so.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "model/calibration.hpp"
#include "model/host.hpp"

namespace kvsim {

struct HostOpsPhase {
  std::string name;           // the cost model's phase name (e.g. cpu_rerank)
  double ops_per_layer = 0;   // operators one layer issues (for the record; fixed_s already holds their cost)
  double fixed_s = 0;         // one layer's fixed time on the measuring host, seconds
  // bytes per layer -> bytes/s per thread on the measuring host (points sorted by x; log-x interpolation).
  EfficiencyCurve rate_per_thread;
};

struct HostOpsProfile {
  std::string name, framework;
  HostSpec measured_on;  // the host it was measured on (its clock is the scaling rule's reference)
  int threads = 1;       // intra-op threads of the measurement
  std::vector<HostOpsPhase> phases;
  const HostOpsPhase* find(std::string_view phase) const;
};

// Reads a `kvsim.host_profile/1` file (schema in docs/scenarios.md); errors name the file and field.
HostOpsProfile load_host_ops_file(const std::string& path);

// The profile on one target host: what the roofline and the simulator read for a host phase the
// profile names (model/roofline.hpp, host_limits), with the target's cores and DRAM bandwidth (this
// GPU's share, from the Machine).
struct HostOpsOnTarget {
  std::shared_ptr<const HostOpsProfile> profile;
  double time_scale = 1;  // clock_measured / clock_target (clock_time_scale; 1 when either is unknown)
  bool clock_known = false;
  // Fixed seconds per layer and the data rate (bytes/s) for `bytes` per layer of the phase on the target.
  double fixed_s(const HostOpsPhase& p) const { return p.fixed_s * time_scale; }
  double rate(const HostOpsPhase& p, double bytes, double cores, double dram, bool* outside = nullptr) const;
};

// The plan's note on a scenario whose host phases run as framework operators: which phases, the profile,
// where it was measured and how it was scaled to this host (`cores`, `dram`: the Machine's).
std::string host_ops_note(const HostOpsOnTarget& t, double cores, double dram);

}  // namespace kvsim
