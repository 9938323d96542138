#include "kernels/reference/score.hpp"

#include <algorithm>
#include <cmath>

#include "kernels/reference/hd.hpp"

namespace kvsim::ref {

void score_gemv(const float* q, const float* M, int64_t n, int d, float* scores, ScoreKind kind, float scale) {
  if (kind == ScoreKind::dot) {
    for (int64_t i = 0; i < n; ++i) scores[i] = scale * hd::dot(q, M + i * d, d);
    return;
  }
  const float qn = std::sqrt(hd::dot(q, q, d));
  for (int64_t i = 0; i < n; ++i) {
    const float* r = M + i * d;
    const float den = qn * std::sqrt(hd::dot(r, r, d));
    scores[i] = den > 0.f ? hd::dot(q, r, d) / den : 0.f;
  }
}

// Every (query, row) pair scored exactly as score_gemv scores it (hd::dot: one sum in channel order), so
// a GEMM-shaped scoring (qcIVF's centroids, CTKVR's rerank) rounds the same as its GEMV form and as the
// CUDA twin (ops.cu's score_kernel); kernels/host/dots.hpp is the fast version of the same arithmetic.
void score_gemm(const float* Q, int64_t m, const float* M, int64_t n, int d, float* S, ScoreKind kind, float scale) {
  for (int64_t j = 0; j < m; ++j) score_gemv(Q + j * d, M, n, d, S + j * n, kind, scale);
}

void reduce_max_rows(const float* S, int64_t m, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = -INFINITY;
  for (int64_t j = 0; j < m; ++j)
    for (int64_t i = 0; i < n; ++i) out[i] = std::max(out[i], S[j * n + i]);
}

void reduce_sum_rows(const float* S, int64_t m, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = 0.f;
  for (int64_t j = 0; j < m; ++j)
    for (int64_t i = 0; i < n; ++i) out[i] += S[j * n + i];
}

void sekv_routing_scores(const float* q_proj, const float* summaries, int64_t m, int d_proj, const int32_t* span_len,
                         float* alpha) {
  const float inv_sqrt = 1.f / std::sqrt(float(d_proj));
  for (int64_t s = 0; s < m; ++s)
    alpha[s] = hd::sekv_route(hd::dot(q_proj, summaries + s * d_proj, d_proj), inv_sqrt, span_len[s]);
}

void softmax_rows(float* S, int64_t m, int64_t n) {
  for (int64_t j = 0; j < m; ++j) {
    float* r = S + j * n;
    float mx = -INFINITY;
    for (int64_t i = 0; i < n; ++i) mx = std::max(mx, r[i]);
    if (!(mx > -INFINITY)) {
      for (int64_t i = 0; i < n; ++i) r[i] = 0.f;
      continue;
    }
    double s = 0;
    for (int64_t i = 0; i < n; ++i) s += (r[i] = std::exp(r[i] - mx));
    const float inv = float(1.0 / s);
    for (int64_t i = 0; i < n; ++i) r[i] *= inv;
  }
}

}  // namespace kvsim::ref
