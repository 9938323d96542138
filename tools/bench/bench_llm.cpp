// Google Benchmarks of the GGUF decoder (`kvsim bench --benchmark_filter=Llama|Sgemm`). They need
// the default model (tools/fetch-model.sh, or KVSIM_MODEL_DIR) and skip with a message without it.
//
// BM_LlamaPrefill reports prefill tokens/s and the GEMM work rate (gflops: multiply-adds of the
// projections, attention and the vocabulary projection, x2) as a fraction of BM_SgemmPeak's rate,
// the Eigen SGEMM peak of one thread measured in the same process, times the thread count
// (peak_frac): how much of what Eigen can do on this machine the decoder achieves.
#include <benchmark/benchmark.h>

#include <chrono>
#include <memory>
#include <numeric>

#include <Eigen/Dense>

#include "traces/llm/llama.hpp"
#include "traces/llm/model_path.hpp"

namespace {
using namespace kvsim::llm;

const LlamaModel* model() {
  static std::unique_ptr<LlamaModel> m;
  static bool tried = false;
  if (!tried) {
    tried = true;
    if (const std::string p = default_model_path(); !p.empty()) m = std::make_unique<LlamaModel>(p);
  }
  return m.get();
}

// Eigen float GEMM, n^3, single thread: GFLOP/s of the best of a few repeats.
double sgemm_gflops(int n = 512, int repeats = 5) {
  static double cached = 0;
  if (cached > 0) return cached;
  Eigen::MatrixXf a = Eigen::MatrixXf::Random(n, n), b = Eigen::MatrixXf::Random(n, n), c(n, n);
  double best = 1e30;
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    c.noalias() = a * b;
    benchmark::DoNotOptimize(c.data());
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return cached = 2.0 * double(n) * n * n / best / 1e9;
}

void BM_SgemmPeak(benchmark::State& state) {
  const int n = int(state.range(0));
  Eigen::MatrixXf a = Eigen::MatrixXf::Random(n, n), b = Eigen::MatrixXf::Random(n, n), c(n, n);
  for (auto _ : state) {
    c.noalias() = a * b;
    benchmark::DoNotOptimize(c.data());
  }
  state.counters["gflops"] = benchmark::Counter(2.0 * n * n * n * double(state.iterations()) / 1e9, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_SgemmPeak)->Arg(512)->Unit(benchmark::kMillisecond);

// Multiply-adds x2 of prefilling `n` tokens from position 0 (last-token logits only).
double prefill_flops(const LlamaConfig& c, int64_t n) {
  const double E = c.n_embd, D = c.head_dim, F = c.n_ff;
  const double proj = E * D * (c.n_head * 2.0 + c.n_head_kv * 2.0) + 3.0 * E * F;  // q, o, k, v, gate/up/down
  const double attn = 2.0 * c.n_head * D * (double(n) * double(n + 1) / 2.0);      // scores + weighted values (causal)
  return 2.0 * (c.n_layer * (proj * double(n) + attn) + E * c.n_vocab);
}

void BM_LlamaPrefill(benchmark::State& state) {
  const LlamaModel* m = model();
  if (!m) {
    state.SkipWithError("model not available: run tools/fetch-model.sh");
    return;
  }
  const int n = int(state.range(0));
  std::vector<int32_t> toks(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) toks[size_t(i)] = 100 + (i * 7919) % 40000;  // any ids; speed does not depend on them
  const double peak = sgemm_gflops();
  double seconds = 0;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    LlamaSession s(*m);
    s.set_threads(int(state.range(1)));
    benchmark::DoNotOptimize(s.prefill(toks, false, 128).data());
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  const double gflops = prefill_flops(m->config(), n) * double(state.iterations()) / seconds / 1e9;
  state.counters["tok_per_s"] = double(n) * double(state.iterations()) / seconds;
  state.counters["gflops"] = gflops;
  state.counters["sgemm_peak_gflops"] = peak;
  // The peak is one thread's; with t threads the reachable rate is at most t times that.
  state.counters["peak_frac"] = gflops / (peak * double(state.range(1)));
}
// Args: tokens, threads.
BENCHMARK(BM_LlamaPrefill)->Args({256, 1})->Args({256, 2})->Unit(benchmark::kMillisecond)->Iterations(2);

void BM_LlamaDecode(benchmark::State& state) {
  const LlamaModel* m = model();
  if (!m) {
    state.SkipWithError("model not available: run tools/fetch-model.sh");
    return;
  }
  const int ctx = int(state.range(0));
  std::vector<int32_t> toks(static_cast<size_t>(ctx));
  for (int i = 0; i < ctx; ++i) toks[size_t(i)] = 100 + (i * 7919) % 40000;
  LlamaSession s(*m);
  s.set_threads(int(state.range(1)));
  s.prefill(toks);
  const int64_t base = s.position();
  for (auto _ : state) {
    benchmark::DoNotOptimize(s.decode_step(200).data());
    if (s.position() >= base + 64) {  // keep the context near `ctx`
      state.PauseTiming();
      s.reset();
      s.prefill(toks);
      state.ResumeTiming();
    }
  }
  state.counters["tok_per_s"] = benchmark::Counter(double(state.iterations()), benchmark::Counter::kIsRate);
}
// Args: context, threads.
BENCHMARK(BM_LlamaDecode)->Args({256, 1})->Args({256, 2})->Unit(benchmark::kMillisecond);

}  // namespace
