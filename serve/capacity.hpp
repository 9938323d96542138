// `kvsim capacity`: the fewest GPUs (replicas × tensor parallelism) with which a policy serves a request
// rate within p99 TTFT and TPOT targets. Each candidate is a full serving simulation (serve.hpp) of the
// same requests; for each tensor-parallel degree the replica count is found by doubling and then
// bisection (more replicas never make the p99s worse under either router, so the smallest passing
// count is well defined).
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "serve/serve.hpp"
#include "sweep/target_search.hpp"

namespace kvsim::serve {

struct CapacityQuery {
  double slo_ttft_p99_s = 0, slo_tpot_p99_s = 0;  // 0 = no target on it
  int max_gpus = 64;
  std::vector<int> tensor_parallel;  // degrees to try; empty = 1, 2, 4, 8 where the model divides
  // A quality floor (measured by replaying a trace): each policy's budget knobs are then searched as
  // `kvsim plan --target-tpot` searches them (sweep/target_search.hpp) -- the smallest budgets that meet
  // the floor, and of those the one with the most throughput per GPU at the TPOT target -- at the
  // workload's median prompt and output. Without a floor, budgets stay at the scenario's.
  std::optional<double> min_recall, max_error;
  bool has_quality() const { return min_recall || max_error; }
  // Size at the pessimistic end of the plan's 80% range (model/uncertainty.hpp; the default): every
  // step time scaled by the range's high end over the estimate, read at the workload's median prompt
  // and output at the largest batch that fits. false: at the estimate.
  bool pessimistic = true;
};

struct CapacityTrial {
  int tensor_parallel = 1, replicas = 1;
  bool meets = false;
  std::string why;  // what failed: "p99 TTFT 3.1 s > 2 s", "overloaded", "does not fit"
  ServeSummary summary;
};

struct CapacityResult {
  std::string policy;
  ParamValues params;     // the budget used (the scenario's, or the one the quality floor chose)
  std::string budget;     // its knobs as text, when a quality floor chose it
  std::optional<sweep::QualityValue> quality;  // its quality on the trace, with a floor
  bool found = false;
  int tensor_parallel = 0, replicas = 0;
  int gpus() const { return tensor_parallel * replicas; }
  ServeSummary summary;  // at the answer
  std::vector<CapacityTrial> trials;
  std::string reason;    // when not found
  // The end of the 80% range it was sized at, and the factors on the step times that end means at the
  // answer's tensor parallelism (1 at the estimate).
  bool pessimistic = true;
  double decode_scale = 1, prefill_scale = 1;
};

// `s`: the scenario (its model, GPU, host, calibration and workload settings); `pc`: the policy and its
// parameters; `spec`: the serving block; `requests`: the workload at the queried rate; `quality`: the
// quality of a configuration (needed when q has a floor).
CapacityResult find_capacity(const Scenario& s, const PolicyChoice& pc, const ServingSpec& spec,
                             const std::vector<Request>& requests, const CapacityQuery& q,
                             const sweep::QualityFn* quality = nullptr);

// One policy's answer as `kvsim capacity --format json` lists it (and the Python module's rows):
// policy, found, params, the answer's GPUs, TP, replicas and p99s (or the reason), every trial;
// `quality`: also the budget and its quality.
nlohmann::json capacity_json(const CapacityResult& r, bool quality);

// Why a summary misses the query's targets ("" when it meets them).
std::string capacity_miss(const ServeSummary& s, const CapacityQuery& q);

}  // namespace kvsim::serve
