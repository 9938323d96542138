// Host phases run as framework operators: a host implementation profile. A policy whose paper runs its
// CPU side with a framework's stock operators (PyTorch on the CPU, say) instead of native kernels pays
// what those operators cost: a fixed time per layer however little it moves (Python and ATen dispatch,
// allocation, intra-op parallel regions over a dozen operators) and a per-thread data rate that is far
// below the host's DRAM bandwidth (element-wise gathers, small matmuls, softmax and top-k).
//
// The profile is measured on one host (tools/measure/torch_host_ops.py runs the operator sequence that
// policies/<name>/torch_cpu.py writes down, at the phase's shapes) with n0 threads and scaled to the
// target host by one stated law (docs/cost-model.md, "Host phases as framework operators"):
//   fixed   = fixed_measured x clock_measured / clock_target        (single-threaded instruction streams:
//                                                                     the single-core maximum clocks)
//   rate(x) = min(target DRAM bandwidth,
//                 n0 x rate_per_thread_measured(x) x U(n) / U(n0) x allcore_target / allcore_measured)
//   U(n)    = n / (1 + sigma (n - 1) + kappa n (n - 1))               (the universal scalability law)
//   n       = min(target cores, max(n0, sqrt((1 - sigma) / kappa)))  (a team past the law's peak is
//                                                                     slower, so a deployment runs the peak)
// where x is the bytes one layer's phase moves (the bytes the cost model charges it on DRAM), the
// per-thread rate is interpolated in log x between the measured points (the end value outside), sigma
// and kappa are the profile's `thread_scaling` (fitted to published thread sweeps of framework CPU
// operators, with their source; sigma = kappa = 0 is linear in cores, the rule before issue 41) and
// allcore is each host's all-core clock (its single-core clock where none is given; the note says so).
// A clock missing on either host leaves that ratio at 1, and the plan says so.
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

// How a framework operator's rate grows with its intra-op threads: the universal scalability law's
// contention (sigma) and coherency (kappa) terms. Both 0: linear in threads.
struct ThreadScaling {
  double sigma = 0, kappa = 0;
  std::string source = {};  // where the parameters were fitted ("" = not given: linear)
  // The slow end of the law's uncertainty (`slow:`; another published fit), for the plan's range
  // (model/uncertainty.hpp); the fast end is linear in cores. has_slow false: no range from the law.
  bool has_slow = false;
  double slow_sigma = 0, slow_kappa = 0;
  std::string slow_source = {};
  // U(n): relative throughput of n threads.
  double throughput(double n) const { return n / (1 + sigma * (n - 1) + kappa * n * (n - 1)); }
  // The team a deployment runs on `cores`: the cores, but no more than the law's peak (or the
  // measured n0, when the peak is below it).
  double team(double cores, double n0) const;
  // The rate on `cores` relative to the measured n0 threads' under this law, and under the slow one.
  double gain(double cores, double n0) const;
  double slow_gain(double cores, double n0) const;
};

struct HostOpsProfile {
  std::string name, framework;
  HostSpec measured_on;  // the host it was measured on (its clock is the scaling rule's reference)
  int threads = 1;       // intra-op threads of the measurement
  ThreadScaling scaling;  // `thread_scaling` (absent: linear, and the note says so)
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
  // allcore_measured / allcore_target for the multi-threaded rate; all_core_known: both hosts give an
  // all-core clock (else the single-core clock stood in for a missing one).
  double rate_time_scale = 1;
  bool all_core_known = false;
  // Fixed seconds per layer and the data rate (bytes/s) for `bytes` per layer of the phase on the target.
  double fixed_s(const HostOpsPhase& p) const { return p.fixed_s * time_scale; }
  double rate(const HostOpsPhase& p, double bytes, double cores, double dram, bool* outside = nullptr) const;
};

// The plan's note on a scenario whose host phases run as framework operators: which phases, the profile,
// where it was measured and how it was scaled to this host (`cores`, `dram`: the Machine's).
std::string host_ops_note(const HostOpsOnTarget& t, double cores, double dram);

}  // namespace kvsim
