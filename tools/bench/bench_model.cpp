// Google Benchmarks of the analytical model, run with `kvsim bench` (or `make bench`).
// BM_PlanDesignPoint is the throughput figure quoted in the README: complete design points
// (memory, max batch, TTFT and TPOT with phase breakdown) evaluated per second on one core.
#include <benchmark/benchmark.h>

#include "model/library.hpp"
#include "model/plan.hpp"
#include "policies/registry.hpp"
#include "model/decode_graph.hpp"
#include "model/resources.hpp"
#include "model/step_simulation.hpp"
#include "sim/periodic_step.hpp"

namespace {
using namespace kvsim;

struct Fixture {
  GpuSpec gpu = load_gpu_file(resolve(LibraryKind::hardware, "h100-sxm", "", 0, ""));
  HostSpec host = load_host_file(resolve(LibraryKind::host, "xeon-w9-3495x", "", 0, ""));
  ModelConfig model = load_model_file(resolve(LibraryKind::model, "llama-3.1-8b", "", 0, ""));
  Calibration cal;  // the roofline (every efficiency 1.0)
  Deployment dep = make_deployment(model, gpu, host, cal);
  // The calibrated path a scenario gets by default: published GPU curves + the measured host's curves.
  Calibration calibrated = default_calibration(gpu, host);
  Deployment cal_dep = make_deployment(model, gpu, host, calibrated);
  const Policy* full = find_policy("full");
  ParamValues params = full->defaults();
};

Fixture& fixture() {
  static Fixture f;
  return f;
}

void BM_PlanDesignPoint(benchmark::State& state) {
  Fixture& f = fixture();
  int64_t ctx = 1024;
  for (auto _ : state) {
    DesignPoint p{&f.dep, f.full, &f.params, ctx, 1024, 0};
    PlanResult r = evaluate(p);
    benchmark::DoNotOptimize(r.tpot_s);
    ctx = ctx >= 131072 ? 1024 : ctx + 977;  // vary the point so nothing is hoisted
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["points_per_s"] = benchmark::Counter(double(state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_PlanDesignPoint);

// The same on the default calibration (efficiency curves looked up per phase and ceiling).
void BM_PlanDesignPointCalibrated(benchmark::State& state) {
  Fixture& f = fixture();
  int64_t ctx = 1024;
  for (auto _ : state) {
    DesignPoint p{&f.cal_dep, f.full, &f.params, ctx, 1024, 0};
    PlanResult r = evaluate(p);
    benchmark::DoNotOptimize(r.tpot_s);
    ctx = ctx >= 131072 ? 1024 : ctx + 977;
  }
  state.SetLabel(f.calibrated.name);
  state.counters["points_per_s"] = benchmark::Counter(double(state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_PlanDesignPointCalibrated);

void BM_DecodeStep(benchmark::State& state) {
  Fixture& f = fixture();
  double ctx = 1024;
  for (auto _ : state) {
    benchmark::DoNotOptimize(decode_step_seconds(f.dep, *f.full, f.params, 16, ctx));
    ctx = ctx >= 131072 ? 1024 : ctx + 977;
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_DecodeStep);

// A complete design point for each policy. Policies whose phases use more than the GPU's main stream
// (sentencekv, sekv, ctkvr) are simulated: L layers x their phases as a DAG through the max-min
// fair event loop, a few layers of it laid out and simulated and the period they settle into copied
// to the rest (model/step_simulation.hpp); events_per_s counts the whole step's phase starts and finishes.
void BM_PlanPolicy(benchmark::State& state) {
  Fixture& f = fixture();
  const Policy* pol = all_policies()[size_t(state.range(0))];
  const ParamValues params = pol->defaults();
  int64_t ctx = 8192;
  double events = 0, simulated = 0;
  const sim::PeriodicCounters& runs = sim::periodic_counters();
  const double shortcut_before = double(runs.extrapolated);
  for (auto _ : state) {
    DesignPoint p{&f.dep, pol, &params, ctx, 1024, 8};
    PlanResult r = evaluate(p);
    benchmark::DoNotOptimize(r.tpot_s);
    if (r.simulated) events += 2.0 * (f.model.layers * (r.decode.size() - 1) + 1), ++simulated;
    ctx = ctx >= 131072 ? 8192 : ctx + 977;
  }
  state.SetLabel(std::string(pol->name()));
  state.counters["points_per_s"] = benchmark::Counter(double(state.iterations()), benchmark::Counter::kIsRate);
  // events_per_s counts the events of the whole step, simulated or copied from its period (the
  // periodic shortcut, sim/periodic_step.hpp); `shortcut` is the share of simulated steps it timed.
  if (events > 0) state.counters["events_per_s"] = benchmark::Counter(events, benchmark::Counter::kIsRate);
  if (simulated > 0) state.counters["shortcut"] = (double(runs.extrapolated) - shortcut_before) / simulated;
}
BENCHMARK(BM_PlanPolicy)->DenseRange(0, 8);

// Every policy on the default calibration.
void BM_PlanPolicyCalibrated(benchmark::State& state) {
  Fixture& f = fixture();
  const Policy* pol = all_policies()[size_t(state.range(0))];
  const ParamValues params = pol->defaults();
  int64_t ctx = 8192;
  for (auto _ : state) {
    DesignPoint p{&f.cal_dep, pol, &params, ctx, 1024, 8};
    PlanResult r = evaluate(p);
    benchmark::DoNotOptimize(r.tpot_s);
    ctx = ctx >= 131072 ? 8192 : ctx + 977;
  }
  state.SetLabel(std::string(pol->name()));
  state.counters["points_per_s"] = benchmark::Counter(double(state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_PlanPolicyCalibrated)->DenseRange(0, 8);

}  // namespace

// The pieces of a simulated design point, for the offloading policies (args: index into
// all_policies()): the phase lists, laying the short graph out, and timing it (run_periodic). Where
// BM_PlanPolicy's time goes.
void BM_StepPieces(benchmark::State& state) {
  Fixture& f = fixture();
  const Policy* pol = all_policies()[size_t(state.range(0))];
  const ParamValues params = pol->defaults();
  const int piece = int(state.range(1));  // 0: phase lists, 1: + layout, 2: + simulation
  PhaseList polp, dense;
  sim::DecodeGraph g{size_t(sim::Resource::count)};
  const auto cap = sim::capacities(f.dep.machine);
  const auto cp = sim::couplings(f.dep.machine);
  double ctx = 8192;
  for (auto _ : state) {
    polp.clear(), dense.clear();
    decode_phase_lists(f.dep, *pol, params, StepShape{8, ctx, 512}, polp, dense);
    if (piece >= 1) {
      sim::build_decode_graph(g, polp, dense, sim::kShortcutLayers, f.dep.machine);
      g.graph.prepare();
    }
    if (piece >= 2) {
      sim::PeriodicReport rep;
      benchmark::DoNotOptimize(g.graph.run_periodic(cap, cp, g.layer, &rep, f.model.layers - sim::kShortcutLayers,
                                                       sim::Detail::makespan).makespan);
    }
    ctx = ctx >= 131072 ? 8192 : ctx + 977;
  }
  state.SetLabel(std::string(pol->name()) + (piece == 0 ? " phases" : piece == 1 ? " +layout" : " +simulate"));
}
BENCHMARK(BM_StepPieces)->ArgsProduct({{7, 8}, {0, 1, 2}});
