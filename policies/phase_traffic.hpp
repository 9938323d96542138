// What `kvsim validate --device emu` prints: for every GPU phase of every policy's decode step, the bytes
// and launches the phase model charges next to what the kernels that implement it executed under the
// CUDA emulator — 32-byte sectors after coalescing, the useful bytes among them, kernel launches,
// memsets and host synchronizations (issue #28, item 2). The links come from each policy's folder
// (PhaseKernelLink, policies/<name>/kernels.cpp); a phase without one is listed as such.
//
// The shape is one layer of a small fp32 model (the emulated kernels are fp32) at one context, so the
// model's per-layer work and one run of the kernels describe the same thing.
#pragma once
#include <string>
#include <vector>

#include "model/hardware.hpp"
#include "model/host.hpp"
#include "kernels/emu/counters.hpp"

namespace kvsim {

struct TrafficShape {
  int query_heads = 8, kv_heads = 2, head_dim = 128;
  double context = 16384;  // past CTKVR's 6528 resident tokens, so it offloads and recalls
  std::string model;       // the library model the heads were taken from ("" = the default probe)
};

struct PhaseTrafficRow {
  std::string policy, phase, kind, device;
  bool linked = false;
  std::string kernels;  // what ran (the link's words), or why nothing did
  // The model: the phase's device-memory bytes (HBM; pinned host bytes for a zero-copy gather) and
  // launches for one run (per layer, per sequence, un-amortized).
  double model_bytes = 0, model_launches = 0;
  // The kernels: the bytes of the distinct 32-byte sectors each launch touched (its DRAM traffic with a
  // working set that fits L2: what the model's bytes stand for), the sector bytes of every warp-level
  // request (L1 requests: repeats count) and the useful bytes among those, launches, memsets, host syncs.
  double dram_bytes = 0, sector_bytes = 0, useful_bytes = 0, launches = 0, memsets = 0, host_syncs = 0;
  std::vector<std::string> kernel_names;  // the launches counted, in order
  double ratio = 0;                       // dram_bytes / model_bytes
  // Several launches whose sectors together fit the GPU's L2: dram_bytes counts each sector once for the
  // call (a later launch finds it in L2), not once per launch.
  bool call_in_l2 = false;
  double low = 0.9, high = 1.1;
  std::string why;  // the link's explanation of a range wider than +-10%
  std::string probe_why;  // the policy runs at other parameter values than its defaults here, and why
  emu::Counts counts;  // the counted launches (those the link names) with the run's memsets, copies, syncs
  // Filled by a caller that prices `counts` (kvsim validate --device emu --predict GPU --phases, with
  // validate/kernel_time_model.hpp, a layer above this one): the predicted call time, the phase's model
  // bytes at the GPU's datasheet bandwidth (its roofline bound, launches excluded), the binding term.
  double predicted_s = 0, bound_s = 0;
  std::string time_bound;
  bool within() const { return !linked || (ratio >= low && ratio <= high); }
};

// `policies` empty = every registered policy with a phase-kernels face.
std::vector<PhaseTrafficRow> phase_traffic(const GpuSpec& gpu, const HostSpec& host, const TrafficShape& shape,
                                           const std::vector<std::string>& policies = {});

// `priced_on`: the GPU the rows' times were priced on ("" = not priced: no time columns).
std::string phase_traffic_table(const std::vector<PhaseTrafficRow>& rows, const TrafficShape& shape,
                                const std::string& priced_on = "");
std::string phase_traffic_json(const std::vector<PhaseTrafficRow>& rows, const TrafficShape& shape,
                               const std::string& priced_on = "");

}  // namespace kvsim
