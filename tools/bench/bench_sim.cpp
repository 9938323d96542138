// Google Benchmarks of the discrete-event simulator (`kvsim bench --benchmark_filter=Sim`).
// Reported as phase events per second: every phase contributes two events (start and finish).
#include <benchmark/benchmark.h>

#include <random>

#include "sim/fair_share.hpp"
#include "sim/step_graph.hpp"

namespace {
using namespace kvsim::sim;

// A decode step as several concurrent streams of `per_stream` phases each (e.g. GPU compute, H2D
// prefetch, host work), each phase using 1-3 of 8 resources.
StepGraph make_graph(int streams, int per_stream) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(0.1, 1.0);
  StepGraph g(8);
  for (int s = 0; s < streams; ++s) {
    size_t prev = SIZE_MAX;
    for (int i = 0; i < per_stream; ++i) {
      SimPhase p;
      p.name = "p";
      p.latency = (i % 3 == 0) ? 2e-6 : 0.0;
      p.amount.assign(8, 0.0);
      for (int k = 0; k < 1 + int(rng() % 3); ++k) p.amount[rng() % 8] = u(rng) * 1e9;
      const size_t id = g.add_phase(std::move(p));
      if (prev != SIZE_MAX) g.add_edge(prev, id);
      prev = id;
    }
  }
  return g;
}

void BM_SimStep(benchmark::State& state) {
  const int streams = int(state.range(0)), per_stream = int(state.range(1));
  const StepGraph g = make_graph(streams, per_stream);
  const std::vector<double> cap = {1e15, 6e13, 1e12, 3e12, 3e11, 3e10, 5e10, 4e11};
  for (auto _ : state) benchmark::DoNotOptimize(g.run(cap).makespan);
  state.counters["events_per_s"] =
      benchmark::Counter(2.0 * double(g.size()) * double(state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_SimStep)->Args({1, 8})->Args({3, 8})->Args({4, 32});

}  // namespace
