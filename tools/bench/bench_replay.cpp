// Google Benchmarks of trace replay (`kvsim bench --benchmark_filter=Replay`): the full-attention
// ground truth as batched GEMMs (ground_truth_block), reported as FLOP/s and as a fraction of a
// 1024³ Eigen SGEMM timed in the same process (BM_ReplaySgemmPeak; the fraction uses the peak measured
// once, on first use, with the same build flags).
#include <benchmark/benchmark.h>

#include "replay/replay.hpp"
#include "traces/synthetic/synthetic.hpp"

namespace {
using namespace kvsim;
using namespace kvsim::replay;

double sgemm_peak() {
  static const double peak = measure_sgemm_peak(1024, 5);
  return peak;
}

void BM_ReplaySgemmPeak(benchmark::State& state) {
  double flops = 0;
  for (auto _ : state) flops = measure_sgemm_peak(1024, 1);
  state.counters["FLOPs"] = flops;
}
BENCHMARK(BM_ReplaySgemmPeak)->Unit(benchmark::kMillisecond)->Iterations(3);  // FLOPs: per CPU-second

// One (layer, KV head) ground-truth block: GQA group 4, d = 64, `rows` decode rows at the end of a
// context of range(0) tokens.
void BM_ReplayGroundTruth(benchmark::State& state) {
  const int64_t ctx = state.range(0), rows = state.range(1);
  static std::unique_ptr<SyntheticTrace> trace;
  static TraceData data;
  static int64_t built_for = -1;
  if (built_for != ctx) {
    trace = std::make_unique<SyntheticTrace>(load_synthetic_config(
        "tiny", {{"prompt_tokens", std::to_string(ctx)}, {"generated_tokens", "64"}, {"layers", "1"}, {"kv_heads", "1"},
                 {"heads", "4"}, {"retrieval_heads", "1"}}));
    data = load_trace_data(*trace, 1e10);
    built_for = ctx;
  }
  int64_t s0 = 0;
  while (data.position(s0) < data.P) ++s0;
  GroundTruthBlock gt;
  double flops = 0;
  for (auto _ : state) {
    ground_truth_block(data, 0, 0, s0, s0 + rows, gt);
    flops += gt.flops;
    benchmark::DoNotOptimize(gt.probs.data());
  }
  state.counters["FLOPs"] = benchmark::Counter(flops, benchmark::Counter::kIsRate);
  // Rates are per CPU-second (Google Benchmark's default), as the peak is: the ratio holds on a busy machine.
  state.counters["peak_fraction"] =
      benchmark::Counter(flops / sgemm_peak(), benchmark::Counter::kIsRate);  // FLOP/s ÷ peak FLOP/s
}
BENCHMARK(BM_ReplayGroundTruth)->Args({4096, 32})->Args({4096, 64})->Args({16384, 32})->Unit(benchmark::kMillisecond);

}  // namespace
