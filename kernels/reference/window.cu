// Simple CUDA versions of the observation-window scores (SnapKV / ChunkKV / SentenceKV importance), the
// 1-D pooling and the chunk sums (see cuda.hpp; host twins in window.cpp). One thread per row of the
// window for its softmax statistics, then one thread per prefix key summing its probabilities in the
// host's order (heads, then window queries); pooling and chunk sums share their per-element code with
// the host through hd.hpp.
#include <stdexcept>

#include "kernels/reference/cuda.hpp"
#include "kernels/reference/cuda_common.cuh"
#include "kernels/reference/hd.hpp"

namespace kvsim::ref::KVSIM_CUDA_BACKEND {
namespace {
constexpr int kThreads = 256;

// Row r = g·w + j (query j of head g sees keys 0 .. n-w+j): its max logit and 1 / Σ exp(logit - max),
// the sum in double as on the host.
__global__ void window_row_stats_kernel(const float* Qw, int G, int w, const float* K, int64_t n, int d, float scale,
                                        float* row_max, float* row_inv) {
  const int64_t r = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r >= int64_t(G) * w) return;
  const float* q = Qw + r * d;
  const int64_t seen = n - w + r % w + 1;
  float mx = -INFINITY;
  for (int64_t i = 0; i < seen; ++i) {
    const float s = scale * hd::dot(q, K + i * d, d);
    mx = s > mx ? s : mx;
  }
  double sum = 0;
  for (int64_t i = 0; i < seen; ++i) sum += expf(scale * hd::dot(q, K + i * d, d) - mx);
  row_max[r] = mx;
  row_inv[r] = float(1.0 / sum);
}

__global__ void window_scores_kernel(const float* Qw, int G, int w, const float* K, int64_t n, int d, float scale,
                                     const float* row_max, const float* row_inv, float* scores) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n - w) return;
  float acc = 0.f;
  for (int64_t r = 0; r < int64_t(G) * w; ++r)
    acc += expf(scale * hd::dot(Qw + r * d, K + i * d, d) - row_max[r]) * row_inv[r];
  scores[i] = acc;
}

__global__ void pool1d_kernel(const float* in, int64_t n, int k, bool is_max, float* out) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = hd::pool1d_at(in, n, k, is_max, i);
}

__global__ void chunk_sum_kernel(const float* scores, int64_t n, int chunk, int64_t chunks, float* out) {
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c < chunks) out[c] = hd::chunk_sum_at(scores, n, chunk, c);
}
}  // namespace

void obs_window_scores(const float* Qw, int G, int w, const float* K, int64_t n, int d, float scale, float* scores) {
  if (w <= 0 || w > n) throw std::invalid_argument("obs_window_scores: need 0 < w <= n");
  const int64_t rows = int64_t(G) * w;
  if (n - w <= 0) return;
  if (rows <= 0) {
    detail::check(cudaMemset(scores, 0, size_t(n - w) * sizeof(float)), "obs_window_scores memset");
    return;
  }
  DeviceBuffer<float> row_max(static_cast<size_t>(rows)), row_inv(static_cast<size_t>(rows));
  KVSIM_LAUNCH(window_row_stats_kernel, detail::blocks_for(rows, kThreads), kThreads)(Qw, G, w, K, n, d, scale,
                                                                                   row_max.get(), row_inv.get());
  detail::check_launch("obs_window_scores stats");
  KVSIM_LAUNCH(window_scores_kernel, detail::blocks_for(n - w, kThreads), kThreads)(Qw, G, w, K, n, d, scale,
                                                                                 row_max.get(), row_inv.get(), scores);
  detail::check_launch("obs_window_scores");
}

void pool1d(const float* in, int64_t n, int k, bool is_max, float* out) {
  if (n <= 0) return;
  if (k <= 1) {
    detail::check(cudaMemcpy(out, in, size_t(n) * sizeof(float), cudaMemcpyDeviceToDevice), "pool1d copy");
    return;
  }
  KVSIM_LAUNCH(pool1d_kernel, detail::blocks_for(n, kThreads), kThreads)(in, n, k, is_max, out);
  detail::check_launch("pool1d");
}

void chunk_sum(const float* scores, int64_t n, int chunk, float* out) {
  if (chunk <= 0) throw std::invalid_argument("chunk_sum: chunk");
  const int64_t chunks = (n + chunk - 1) / chunk;
  if (chunks <= 0) return;
  KVSIM_LAUNCH(chunk_sum_kernel, detail::blocks_for(chunks, kThreads), kThreads)(scores, n, chunk, chunks, out);
  detail::check_launch("chunk_sum");
}

}  // namespace kvsim::ref::KVSIM_CUDA_BACKEND
