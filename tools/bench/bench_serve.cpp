// The serving simulator's speed (`kvsim bench --benchmark_filter=Serve`): 100,000 requests of an
// 8K-prompt / 256-output Poisson workload at 2 requests/s on one H100 (scenarios/serving/default.yaml),
// one policy per benchmark, on one core. Counters: simulated requests/s and iterations/s (wall clock),
// and the exact decode steps the cost tables needed. The goal: <= 10 s per policy.
#include <benchmark/benchmark.h>

#include "model/library.hpp"
#include "model/scenario.hpp"
#include "policies/registry.hpp"
#include "serve/serve.hpp"

namespace {
using namespace kvsim;

void BM_Serve(benchmark::State& state, std::string policy) {
  const Scenario s = load_scenario_file(library_dir() + "/serving/default.yaml", policy_catalog());
  const Deployment d = make_deployment(s);
  serve::ServingSpec spec = serve::read_serving(s);
  spec.workload.requests = 100000;
  const auto requests = serve::make_requests(spec.workload, s.model.max_context);
  const PolicyChoice* pc = nullptr;
  for (const PolicyChoice& c : s.policies)
    if (c.policy->name() == policy) pc = &c;
  if (!pc) {
    state.SkipWithError("policy not in the scenario");
    return;
  }
  serve::ServeResult r;
  for (auto _ : state) r = serve::run_serving(d, *pc->policy, pc->params, spec, requests, false);
  state.counters["requests_per_s"] =
      benchmark::Counter(double(requests.size()) * double(state.iterations()), benchmark::Counter::kIsRate);
  state.counters["iterations_per_s"] =
      benchmark::Counter(double(r.summary.iterations) * double(state.iterations()), benchmark::Counter::kIsRate);
  state.counters["exact_decode_steps"] = double(r.decode_evaluations);
}

[[maybe_unused]] const bool registered = [] {
  for (const std::string& p : policy_names())  // every registered policy, in the registry's order
    benchmark::RegisterBenchmark(("BM_Serve/" + p).c_str(), BM_Serve, p)
        ->Unit(benchmark::kSecond)
        ->UseRealTime()
        ->Iterations(1);
  return true;
}();

}  // namespace
