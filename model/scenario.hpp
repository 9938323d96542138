// A scenario: hardware + host + model + workload + policies (+ calibration). Each of hardware, host,
// model and calibration is a library name, a path, or an inline mapping. Command-line overrides go
// through the same validation as the file, and their errors say "command line" instead of a line.
// The format is documented in docs/scenarios.md.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/calibration.hpp"
#include "model/deployment.hpp"
#include "model/hardware.hpp"
#include "model/host.hpp"
#include "model/implementation.hpp"
#include "model/model_config.hpp"
#include "model/policy.hpp"

namespace kvsim {

struct Workload {
  std::vector<int64_t> context_tokens;
  int64_t output_tokens = 1024;
  int64_t batch = 0;  // 0 = max
  int tensor_parallel = 1;
  DType weight_dtype = DType::bf16, kv_dtype = DType::bf16;
  double hbm_utilization = 0.9;
  int64_t prefill_chunk_tokens = 8192;
  bool cuda_graphs = true;
  bool allow_long_context = false;
};

struct PolicyChoice {
  const Policy* policy = nullptr;
  ParamValues params;
};

struct Scenario {
  std::string file;
  GpuSpec gpu;
  HostSpec host;
  ModelConfig model;
  Calibration calibration;
  Workload workload;
  Implementation implementation;  // how the measured code runs (`implementation:`; default: a serving engine)
  std::vector<PolicyChoice> policies;
  // A `reproduce:` block (published figures, scenarios/papers/) is kept as read; `kvsim plan` ignores
  // it and model/reproduction.* checks it.
  YAML::Node reproduce;
  // A `serving:` block (requests over time, docs/serving.md) is kept as read too; serve/ reads it for
  // `kvsim serve` and `kvsim capacity`, and `kvsim plan` ignores it.
  YAML::Node serving;
};

// Values given on the command line; each replaces the scenario's field.
struct Overrides {
  std::optional<std::string> hardware, host, model, calibration, context, output, batch;
  std::optional<std::string> tensor_parallel, weight_dtype, kv_dtype;  // workload fields, checked as the file's
  // What an override's error names as its source: "command line" for the CLI, the function for the
  // Python module ("kvsim.plan"), so every entry point names its errors alike.
  std::string origin = "command line";
  std::vector<std::string> policies;  // replaces the list when non-empty
  // With `policies`: a policy the scenario's own list names keeps the parameters the list gives it,
  // instead of its defaults (replay: the scenario says how each policy is set, --policy only narrows
  // which ones run). The --set values apply on top either way.
  bool keep_scenario_params = false;
  std::vector<std::string> sets;      // "POLICY.PARAM=VALUE"
};

// Policy names resolve in `catalog` (the built-in table is policies/registry.hpp's policy_catalog()).
Scenario load_scenario_file(const std::string& path, const PolicyCatalog& catalog, const Overrides& o = {});
// Applies one "POLICY.PARAM=VALUE" (a --set, parsed by model/policy_setting.hpp) to the matching
// entries of `policies`; throws InputError naming --set, the value and what is allowed.
void apply_set(const std::string& set, std::vector<PolicyChoice>& policies, const std::string& origin = "command line");
Scenario load_scenario(const YAML::Node& doc, const std::string& file, const PolicyCatalog& catalog,
                       const Overrides& o = {});

// The deployment a scenario describes: its workload's settings and its implementation profile. The
// result points into `s`, which must outlive it.
Deployment make_deployment(const Scenario& s);

}  // namespace kvsim
