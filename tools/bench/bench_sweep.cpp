// Google Benchmarks of sweeps (docs/sweeps.md), run with `kvsim bench --benchmark_filter=Sweep`.
//
// BM_SweepPointPath: one thread, the per-point path without I/O (decode the point number, set the
// varied fields, key, evaluate, format the CSV row). BM_SweepEvaluateOnly: the same points through
// model/plan's evaluate() alone — the ceiling the per-point path is measured against.
// BM_SweepRun/N: a whole sweep into a results file on N threads, points per second end to end;
// `fraction_of_ceiling` divides it by N x the evaluate-only rate measured in the same process.
#include <benchmark/benchmark.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "model/library.hpp"
#include "sweep/evaluator.hpp"
#include "sweep/result_row.hpp"
#include "sweep/runner.hpp"

namespace {
using namespace kvsim;
using namespace kvsim::sweep;


struct Fixture {
  SweepSpec spec = load_sweep_file(library_dir() + "/sweeps/speed.yaml");
  PointSpace space{spec};
  Evaluator ev{spec, space};
};
Fixture& fixture() {
  static Fixture f;
  return f;
}

// Evaluate-only rate on one thread over every point of the sweep (points/s).
double evaluate_only_rate() {
  static const double rate = [] {
    Fixture& f = fixture();
    Coords c;
    PointInputs in;
    std::vector<PointInputs> all;
    for (uint64_t i = 0; i < f.space.size(); ++i) {
      f.space.decode(i, c);
      f.ev.resolve(c, in);
      all.push_back(in);
    }
    double best = 0;
    for (int rep = 0; rep < 3; ++rep) {
      const auto t0 = std::chrono::steady_clock::now();
      double sink = 0;
      for (const PointInputs& p : all) sink += f.ev.evaluate(p).tpot_s;
      benchmark::DoNotOptimize(sink);
      best = std::max(best, double(all.size()) / std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    return best;
  }();
  return rate;
}

void BM_SweepEvaluateOnly(benchmark::State& state) {
  Fixture& f = fixture();
  Coords c;
  PointInputs in;
  uint64_t i = 0;
  for (auto _ : state) {
    state.PauseTiming();
    f.space.decode(i, c);
    f.ev.resolve(c, in);
    state.ResumeTiming();
    benchmark::DoNotOptimize(f.ev.evaluate(in).tpot_s);
    i = (i + 1) % f.space.size();
  }
  state.counters["points_per_s"] = benchmark::Counter(double(state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_SweepEvaluateOnly);

void BM_SweepPointPath(benchmark::State& state) {
  Fixture& f = fixture();
  Coords c;
  PointInputs in;
  std::string row;
  uint64_t i = 0;
  for (auto _ : state) {
    f.space.decode(i, c);
    f.ev.resolve(c, in);
    const uint64_t key = f.ev.key(in);
    const PlanResult r = f.ev.evaluate(in);
    row.clear();
    append_row(row, f.spec, i, key, c, in, r, nullptr);
    benchmark::DoNotOptimize(row.data());
    i = (i + 1) % f.space.size();
  }
  state.counters["points_per_s"] = benchmark::Counter(double(state.iterations()), benchmark::Counter::kIsRate);
  const double ceiling = evaluate_only_rate();
  state.counters["evaluate_only_points_per_s"] = ceiling;
}
BENCHMARK(BM_SweepPointPath);

// End to end: a fresh results file per iteration (scenarios/sweeps/speed.yaml, 45,568 points).
void BM_SweepRun(benchmark::State& state) {
  Fixture& f = fixture();
  const int threads = int(state.range(0));
  const std::string out = (std::filesystem::temp_directory_path() / "kvsim_bench_sweep.csv").string();
  double points = 0, seconds = 0;
  for (auto _ : state) {
    std::filesystem::remove(out);
    RunOptions o;
    o.threads = threads;
    const auto t0 = std::chrono::steady_clock::now();
    const RunStats st = run_sweep(f.spec, out, o);
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    points += double(st.evaluated);
  }
  std::filesystem::remove(out);
  const double rate = points / seconds;
  state.counters["points_per_s"] = rate;
  state.counters["fraction_of_ceiling"] = rate / (threads * evaluate_only_rate());
  state.counters["cores"] = double(std::thread::hardware_concurrency());
}
BENCHMARK(BM_SweepRun)->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
