// SnapKV / ChunkKV / SentenceKV importance on the device: observation-window scores (kvsim::ref::
// obs_window_scores), SnapKV's 1-D pooling and ChunkKV's chunk sums. The arithmetic is the reference's
// (hd.hpp; the row sums in double), so the scores — and the top-k over them — are bit-identical to the
// host's. (1) One thread per window row (head g, query j): its max logit and 1/Σexp over the keys it
// sees (causal: the first n - w + j + 1). (2) One thread per prefix key: the probabilities of all G·w
// rows summed in the host's order (heads, then window queries); consecutive threads on consecutive keys
// read the same query row (broadcast). Bound: (2 + 1)·G·w·n·d·2 FLOPs (the logits are recomputed instead
// of stored: no G·w·n scratch), compute-bound at SnapKV's sizes; pooling and chunk sums one pass.
#include <stdexcept>

#include "kernels/optimized/cuda.hpp"
#include "kernels/reference/cuda_common.cuh"
#include "kernels/reference/hd.hpp"

namespace kvsim::opt::KVSIM_CUDA_BACKEND {
namespace {
namespace check = ::kvsim::ref::KVSIM_CUDA_BACKEND::detail;
namespace hd = ::kvsim::ref::hd;
constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads) window_row_stats_kernel(WindowScoreParams p) {
  const int64_t r = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r >= int64_t(p.groups) * p.window) return;
  const float* q = p.queries + r * p.d;
  const int64_t seen = p.n - p.window + r % p.window + 1;
  float mx = -INFINITY;
  for (int64_t i = 0; i < seen; ++i) {
    const float s = p.scale * hd::dot(q, p.keys + i * p.d, p.d);
    mx = s > mx ? s : mx;
  }
  double sum = 0;
  for (int64_t i = 0; i < seen; ++i) sum += expf(p.scale * hd::dot(q, p.keys + i * p.d, p.d) - mx);
  p.row_max[r] = mx;
  p.row_inv[r] = float(1.0 / sum);
}

__global__ void __launch_bounds__(kThreads) window_scores_kernel(WindowScoreParams p) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= p.n - p.window) return;
  float acc = 0.f;
  for (int64_t r = 0; r < int64_t(p.groups) * p.window; ++r)
    acc += expf(p.scale * hd::dot(p.queries + r * p.d, p.keys + i * p.d, p.d) - p.row_max[r]) * p.row_inv[r];
  p.scores[i] = acc;
}

__global__ void __launch_bounds__(kThreads) pool1d_kernel(const float* in, int64_t n, int k, bool is_max, float* out) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = k <= 1 ? in[i] : hd::pool1d_at(in, n, k, is_max, i);
}

__global__ void __launch_bounds__(kThreads) chunk_sum_kernel(const float* scores, int64_t n, int chunk, int64_t chunks,
                                                             float* out) {
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c < chunks) out[c] = hd::chunk_sum_at(scores, n, chunk, c);
}
}  // namespace

void obs_window_scores(const WindowScoreParams& p) {
  if (p.window <= 0 || p.window > p.n)
    throw std::runtime_error("opt::obs_window_scores: need 0 < window <= n (window " + std::to_string(p.window) +
                             ", n " + std::to_string(p.n) + ")");
  const int64_t rows = int64_t(p.groups) * p.window;
  if (p.n - p.window <= 0) return;
  if (rows <= 0) {
    check::check(cudaMemset(p.scores, 0, size_t(p.n - p.window) * sizeof(float)), "opt::obs_window_scores (zero)");
    return;
  }
  if (!p.row_max || !p.row_inv) throw std::runtime_error("opt::obs_window_scores: row scratch missing");
  KVSIM_LAUNCH(window_row_stats_kernel, check::blocks_for(rows, kThreads), kThreads)(p);
  check::check(cudaGetLastError(), "opt::obs_window_scores (row stats)");
  KVSIM_LAUNCH(window_scores_kernel, check::blocks_for(p.n - p.window, kThreads), kThreads)(p);
  check::check(cudaGetLastError(), "opt::obs_window_scores");
}

void pool1d(const float* in, int64_t n, int kernel, bool is_max, float* out) {
  if (n <= 0) return;
  KVSIM_LAUNCH(pool1d_kernel, check::blocks_for(n, kThreads), kThreads)(in, n, kernel, is_max, out);
  check::check(cudaGetLastError(), "opt::pool1d");
}

void chunk_sum(const float* scores, int64_t n, int chunk, float* out) {
  if (chunk <= 0) throw std::runtime_error("opt::chunk_sum: chunk <= 0");
  const int64_t chunks = n > 0 ? (n + chunk - 1) / chunk : 0;
  if (chunks == 0) return;
  KVSIM_LAUNCH(chunk_sum_kernel, check::blocks_for(chunks, kThreads), kThreads)(scores, n, chunk, chunks, out);
  check::check(cudaGetLastError(), "opt::chunk_sum");
}

}  // namespace kvsim::opt::KVSIM_CUDA_BACKEND
