// A sweep file (docs/sweeps.md): a base scenario, the policies, and axes over scenario fields and
// policy parameters. Each axis is a list, a linear range or a log range of values; axes listed one by
// one are crossed, axes under `zip:` advance together. Every value is checked here, once, so the
// per-point path never parses or validates anything.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "model/scenario.hpp"

namespace kvsim {
struct SyntheticConfig;
}

namespace kvsim::sweep {

// What an axis varies. Deployment fields change the machine or the per-GPU shapes (a Deployment is
// built once per distinct combination); the others vary per point.
enum class FieldKind {
  hardware, host, model, calibration,                       // library entries (deployment)
  tensor_parallel, weight_dtype, kv_dtype, hbm_utilization,  // workload fields (deployment)
  prefill_chunk_tokens, cuda_graphs, allow_long_context,
  library_field,                                             // hardware.KEY, host.KEY, model.KEY (deployment)
  context_tokens, output_tokens, batch,                      // workload fields (per point)
  policy_param                                               // POLICY.PARAM (per point, one policy)
};
bool is_deployment_field(FieldKind k);

struct Axis {
  std::string field;                 // as written: "workload.context_tokens", "chess.rho_page", "hardware"
  FieldKind kind = FieldKind::context_tokens;
  const Policy* policy = nullptr;    // policy_param only
  int param = -1;                    // index into policy->params()
  std::string entry, key;            // library_field: "hardware" and "memory.bandwidth_gbs"
  std::vector<double> numbers;       // the value (choices: the word's index; batch max: 0; booleans 0/1)
  std::vector<std::string> texts;    // the value as the results file writes it
  int line = 0;                      // where the axis is in the sweep file
};

// One or more axes advancing together (a crossed axis is a group of one).
struct AxisGroup {
  std::vector<Axis> axes;
  size_t size() const { return axes.front().numbers.size(); }
  bool applies_to(const Policy* p) const;  // false when every axis is another policy's parameter
  bool has_deployment_field() const;
};

struct TraceSettings {
  std::string path;  // a trace file, or the synthetic config's name or path (then `synthetic` is set)
  // A synthetic trace generated from this configuration instead of a file (sweep/quality_source.hpp).
  std::shared_ptr<const SyntheticConfig> synthetic;
  int64_t max_steps = 0;    // decode rows replayed (0 = all)
  int topk = 64;
  double memory_limit_gib = 8;
  std::string cache;        // an on-disk quality cache (sweep/quality.hpp); "" = none
};

// A Pareto front: per policy, the rows no other row of that policy beats on both columns.
struct ParetoSpec {
  std::string x, y;
};
// Columns a front may use, and whether larger is better.
bool pareto_column_known(const std::string& column, bool* maximize = nullptr);

struct SweepSpec {
  std::string file;                 // the sweep file
  std::string scenario_file;        // where the base scenario came from (the sweep file when inline)
  YAML::Node scenario_doc;          // the base scenario as written
  Scenario base;                    // loaded with this sweep's policies
  std::vector<AxisGroup> groups;    // in file order; the first varies slowest
  std::optional<TraceSettings> trace;
  std::vector<ParetoSpec> pareto;
};

// Sets a library-entry field (hardware.memory.bandwidth_gbs) in a scenario document: the entry named
// there (or the GPU's default host) is loaded as a mapping, inline, and the key set in it, so the
// library's loader checks the value like any other.
void set_library_field(YAML::Node& doc, const Axis& a, const std::string& text);

SweepSpec load_sweep_file(const std::string& path);
SweepSpec load_sweep(const YAML::Node& doc, const std::string& file);

}  // namespace kvsim::sweep
