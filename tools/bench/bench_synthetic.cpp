// Google Benchmarks of the synthetic trace generator (traces/synthetic/synthetic.hpp), run with `kvsim bench`.
// BM_SyntheticKeys is the figure quoted in docs/synthetic-traces.md: post-RoPE keys generated per
// second on one core (floats/s), the inner loop of writing a synthetic trace.
#include <benchmark/benchmark.h>

#include <vector>

#include "traces/synthetic/synthetic.hpp"

namespace {
using namespace kvsim;

// Llama-3.1-8B's head shape (d = 128) over a 32K-token trace, one layer and KV head stored.
const SyntheticTrace& trace() {
  static const SyntheticTrace t = [] {
    SyntheticConfig c;
    c.layers = 32;
    c.heads = 32;
    c.kv_heads = 8;
    c.head_dim = 128;
    c.rope_theta = 500000;
    c.store_layers = {15};
    c.store_kv_heads = {3};
    c.prompt_tokens = 32768;
    c.generated_tokens = 256;
    c.obs_window = 64;
    c.needles = {{0.5, 32}};
    c.dtype = DType::fp32;
    return SyntheticTrace(c);
  }();
  return t;
}

// Rows of 4096 tokens at a time (2 MiB of floats), walking through the trace.
void BM_SyntheticKeys(benchmark::State& state) {
  const SyntheticTrace& t = trace();
  const int64_t rows = 4096, d = t.head_dim(), T = t.tokens_count();
  std::vector<float> out(size_t(rows * d));
  int64_t t0 = 0;
  for (auto _ : state) {
    t.keys(0, 0, t0, t0 + rows, out.data());
    benchmark::DoNotOptimize(out.data());
    t0 = t0 + 2 * rows > T ? 0 : t0 + rows;
  }
  state.SetItemsProcessed(state.iterations() * rows * d);
  state.counters["floats_per_s"] = benchmark::Counter(double(state.iterations() * rows * d), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_SyntheticKeys);

void BM_SyntheticValues(benchmark::State& state) {
  const SyntheticTrace& t = trace();
  const int64_t rows = 4096, d = t.head_dim(), T = t.tokens_count();
  std::vector<float> out(size_t(rows * d));
  int64_t t0 = 0;
  for (auto _ : state) {
    t.values(0, 0, t0, t0 + rows, out.data());
    benchmark::DoNotOptimize(out.data());
    t0 = t0 + 2 * rows > T ? 0 : t0 + rows;
  }
  state.counters["floats_per_s"] = benchmark::Counter(double(state.iterations() * rows * d), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_SyntheticValues);

// All decode queries of one query head (320 rows: 64 question + 256 decode).
void BM_SyntheticQueries(benchmark::State& state) {
  const SyntheticTrace& t = trace();
  const int64_t S = t.steps_count(), d = t.head_dim();
  std::vector<float> out(size_t(S * d));
  for (auto _ : state) {
    t.queries(0, 1, 0, S, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["floats_per_s"] = benchmark::Counter(double(state.iterations() * S * d), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_SyntheticQueries);

}  // namespace
