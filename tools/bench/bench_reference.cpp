// Google Benchmarks of the heaviest host reference kernels (`kvsim bench --benchmark_filter=Ref`):
// the CPU side of the model-versus-kernel loop. Counters: bytes_per_second of KV (or vectors) read,
// FLOPs per second.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <random>
#include <vector>

#include "kernels/reference/reference.hpp"

namespace {
using namespace kvsim::ref;

std::vector<float> randn(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0.f, 1.f);
  std::vector<float> v(n);
  for (auto& x : v) x = g(rng);
  return v;
}

// bytes_per_second (Google Benchmark's own counter) and FLOPs per second.
void rate_counters(benchmark::State& state, double bytes, double flops) {
  const double it = double(state.iterations());
  state.SetBytesProcessed(int64_t(bytes * it));
  state.counters["FLOPs"] = benchmark::Counter(flops * it, benchmark::Counter::kIsRate);
}

// Dense decode attention of one head over n tokens, d = 128 (reads K and V once).
void BM_RefDenseAttention(benchmark::State& state) {
  const int64_t n = state.range(0);
  const int d = 128;
  const auto K = randn(size_t(n) * d, 1), V = randn(size_t(n) * d, 2), q = randn(d, 3);
  std::vector<float> out(d);
  for (auto _ : state) {
    benchmark::DoNotOptimize(decode_attention(q.data(), K.data(), V.data(), n, d, 0.088f, out.data()));
    benchmark::ClobberMemory();
  }
  rate_counters(state, 2.0 * n * d * 4, 4.0 * n * d);
}
BENCHMARK(BM_RefDenseAttention)->Arg(32768);

// Token-gather sparse attention: m random distinct rows of a 32K-token head, d = 128.
void BM_RefGatherAttention(benchmark::State& state) {
  const int64_t n = 32768, m = state.range(0);
  const int d = 128;
  const auto K = randn(size_t(n) * d, 4), V = randn(size_t(n) * d, 5), q = randn(d, 6);
  std::vector<int32_t> idx(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) idx[size_t(i)] = int32_t(i);
  std::shuffle(idx.begin(), idx.end(), std::mt19937(7));
  idx.resize(size_t(m));
  std::vector<float> out(d);
  for (auto _ : state) {
    benchmark::DoNotOptimize(gather_attention(q.data(), K.data(), V.data(), n, d, idx.data(), m, 0.088f, out.data()));
    benchmark::ClobberMemory();
  }
  rate_counters(state, 2.0 * m * d * 4, 4.0 * m * d);
}
BENCHMARK(BM_RefGatherAttention)->Arg(1024)->Arg(4096);

// Scoring GEMV of one query against 4K stored vectors (summaries / centroids / page vectors).
void BM_RefScoreGemv(benchmark::State& state) {
  const int64_t n = 4096;
  const int d = int(state.range(0));
  const auto M = randn(size_t(n) * d, 8), q = randn(size_t(d), 9);
  std::vector<float> s(static_cast<size_t>(n));
  const ScoreKind kind = state.range(1) ? ScoreKind::cosine : ScoreKind::dot;
  for (auto _ : state) {
    score_gemv(q.data(), M.data(), n, d, s.data(), kind);
    benchmark::ClobberMemory();
  }
  rate_counters(state, double(n) * d * 4, 2.0 * n * d * (kind == ScoreKind::cosine ? 2 : 1));
}
BENCHMARK(BM_RefScoreGemv)->Args({128, 0})->Args({128, 1})->Args({1024, 0});

// Randomized truncated SVD of a 256 x 128 span block, R_max = 32 (SEKV's prefill build). FLOPs are the
// sketch GEMMs only: 2·n·d·ℓ per pass, (2 + 2·power_iters) passes.
void BM_RefRandomizedSvd(benchmark::State& state) {
  const int64_t n = 256;
  const int d = 128, rmax = 32, over = 8, power = 2;
  const auto X = randn(size_t(n) * d, 10);
  for (auto _ : state) {
    auto f = randomized_svd(X.data(), n, d, 0.9, rmax, over, power, 11);
    benchmark::DoNotOptimize(f.rank);
  }
  const double ell = rmax + over;
  rate_counters(state, double(n) * d * 4, 2.0 * n * d * ell * (2 + 2 * power));
  state.counters["blocks/s"] = benchmark::Counter(double(state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_RefRandomizedSvd);

}  // namespace
