// Random scenarios drawn from the library, for the property suite (tests/properties/README.md).
//
// A ScenarioSpec is what a scenario file says, as plain fields: a GPU, host, model and calibration by
// library name, the weight and KV dtypes, the tensor-parallel degree, one context and batch, one
// implementation profile (none, or one of the `implementation:` blocks of scenarios/papers/) and one
// policy with its parameters. It is loaded through the same code as a file (load_scenario), so a
// generated case is a scenario any user could write: `yaml()` prints it, and a failing property's
// shrunk case pasted into a file reproduces with `kvsim plan FILE`.
#pragma once
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include <rapidcheck.h>

#include "model/deployment.hpp"
#include "model/scenario.hpp"

namespace kvsim::props {

struct ScenarioSpec {
  std::string gpu, host, model;
  std::string calibration = "auto";  // auto (the library's best for the GPU and host) or roofline
  std::string weight_dtype, kv_dtype;
  int tp = 1;
  int64_t context = 4096, output = 256, batch = 1;  // batch 0: the largest that fits
  int64_t prefill_chunk = 8192;                      // workload.prefill_chunk_tokens
  bool cuda_graphs = true;                           // workload.cuda_graphs
  int implementation = -1;                           // index into implementation_profiles(); -1 none
  std::string policy = "full";
  std::vector<std::pair<std::string, std::string>> params = {};  // name, value as the file writes it
  std::string yaml() const;
};
void showValue(const ScenarioSpec& s, std::ostream& os);

// The `implementation:` blocks of the paper scenarios (scenarios/papers/**), as YAML text, deduplicated.
const std::vector<std::string>& implementation_profiles();

// Loaded through load_scenario with the built-in policy catalog; throws InputError as a file would.
Scenario load(const ScenarioSpec& s);

// What a generator varies. A field it does not vary keeps ScenarioSpec's default (policy full with its
// defaults, no implementation profile, the model's native dtypes, TP 1); the calibration is always
// `auto` (a property that compares calibrations sets it itself).
struct Draw {
  bool policy = true, params = true, implementation = true, dtypes = true, tp = true;
  bool engine = true;            // prefill chunk (512 .. 16,384 tokens) and CUDA graphs on or off
  int64_t max_context = 131072;  // contexts drawn in 1,024 .. min(this, the model's max_context)
  int64_t max_batch = 16;        // batches drawn in 1 .. max_batch; 0: batch max (the largest that fits)
};

// A valid scenario: tensor parallelism that splits the model, dtypes the GPU has tensor cores for, a
// context within the model's, parameters in their declared ranges (near their defaults: from a quarter
// to four times, clamped to the range; words among their choices).
rc::Gen<ScenarioSpec> scenarios(const Draw& d = {});
// Random in-range values for one policy's parameters.
rc::Gen<std::vector<std::pair<std::string, std::string>>> policy_params(const std::string& policy);

// The policies of the built-in table, by name.
const std::vector<std::string>& builtin_policy_names();

}  // namespace kvsim::props
