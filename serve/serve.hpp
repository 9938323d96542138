// `kvsim serve`: a scenario's `serving:` block (workload, engine, SLOs, replicas) run through one Engine
// per replica, with a router across replicas, and summarized as latency percentiles, throughput,
// goodput and memory over time. docs/serving.md documents the block and the outputs.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/scenario.hpp"
#include "serve/engine.hpp"
#include "serve/workload.hpp"

namespace kvsim::serve {

enum class Router { round_robin, least_loaded };
const char* router_name(Router r);

struct ServingSpec {
  WorkloadSpec workload;
  EngineConfig engine;
  int64_t concurrency = 0;   // > 0: a closed loop of this many clients (arrival times ignored)
  double slo_ttft_s = 0;     // goodput counts requests meeting both SLOs; 0 = no SLO on it
  double slo_tpot_s = 0;
  int replicas = 1;
  Router router = Router::round_robin;
};

// The scenario's `serving:` block (defaults when it has none). The chunk size defaults to the
// workload's prefill_chunk_tokens (capped by the token budget).
ServingSpec read_serving(const Scenario& s);

struct Percentiles {
  double p50 = 0, p90 = 0, p99 = 0, mean = 0, max = 0;
  int64_t n = 0;
};
Percentiles percentiles(std::vector<double> v);

struct ServeSummary {
  int64_t requests = 0, finished = 0, rejected = 0, preemptions = 0, iterations = 0;
  double duration_s = 0;               // first arrival to last finish
  double last_arrival_s = 0, drain_s = 0;  // drain: last finish - last arrival
  Percentiles ttft, tpot, e2e;
  double throughput_tok_s = 0, request_rate = 0;  // output tokens / s, finished requests / s (all replicas)
  double goodput_rate = 0, slo_attainment = 0;    // requests / s meeting the SLOs, and their fraction
  double mean_batch = 0, mean_waiting = 0, busy_fraction = 0;
  double little_l = 0, little_lambda_w = 0;       // time-averaged requests in system, and rate × mean e2e
  double hbm_mean = 0, hbm_peak = 0, hbm_capacity = 0, dram_mean = 0, dram_peak = 0;
  double swap_bytes = 0;
  bool overloaded = false;
  std::string overload_reason;
};

struct ServeResult {
  std::string label;  // the policy (with parameters when several entries share a name)
  int tensor_parallel = 1, replicas = 1;
  std::vector<RequestResult> requests;                // by request id
  std::vector<std::vector<IterationRecord>> iterations;  // per replica (when recorded)
  ServeSummary summary;
  int64_t decode_evaluations = 0;                     // exact decode steps the tables needed
  double wall_s = 0;                                  // the simulation's own run time
};

// Runs `requests` through spec.replicas engines of deployment `d` under policy `pol`.
ServeResult run_serving(const Deployment& d, const Policy& pol, const ParamValues& params, const ServingSpec& spec,
                        const std::vector<Request>& requests, bool record_iterations);
// The same on cost tables the caller keeps (their deployment, policy and parameters): runs that differ
// only in the workload, the engine or the replicas (capacity's trials) share the exact steps computed.
ServeResult run_serving(StepCosts& costs, const Policy& pol, const ServingSpec& spec,
                        const std::vector<Request>& requests, bool record_iterations);
// The longest prompt of `requests` (what StepCosts sizes the prefill workspace by).
int64_t max_prompt(const std::vector<Request>& requests);

ServeSummary summarize(const std::vector<RequestResult>& reqs, const std::vector<EngineTotals>& totals,
                       const ServingSpec& spec, double hbm_capacity);

nlohmann::json summary_json(const ServeResult& r, const ServingSpec& spec);
// The per-request CSV (arrival, first token, finish, TTFT, mean TPOT, preemptions, ...).
std::string requests_csv(const std::vector<ServeResult>& results);
// A Chrome trace-event JSON of the iterations (one track per policy and replica; open in Perfetto).
nlohmann::json iterations_timeline(const std::vector<ServeResult>& results);
// Per-iteration time series (time, running, waiting, HBM) for tools/plot.
std::string iterations_csv(const std::vector<ServeResult>& results);

}  // namespace kvsim::serve
