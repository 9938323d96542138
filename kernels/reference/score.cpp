#include "kernels/reference/score.hpp"

#include <Eigen/Dense>

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

// One matrix product (Eigen's blocked SGEMM) rather than m GEMVs: prefill builders (qcIVF, observation
// windows) score thousands of queries against every key, and a GEMM reads each key block once for
// many queries. Cosine scores are the dot products of the unit-normalized rows.
void score_gemm(const float* Q, int64_t m, const float* M, int64_t n, int d, float* S, ScoreKind kind, float scale) {
  using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  Eigen::Map<const RowMat> q(Q, m, d), k(M, n, d);
  Eigen::Map<RowMat> s(S, m, n);
  if (kind == ScoreKind::dot) {
    s.noalias() = scale * (q * k.transpose());
    return;
  }
  auto unit = [d](const Eigen::Map<const RowMat>& x) {
    RowMat u = x;
    for (Eigen::Index i = 0; i < u.rows(); ++i) {
      const float nrm = std::sqrt(hd::dot(x.row(i).data(), x.row(i).data(), d));
      if (nrm > 0.f) u.row(i) /= nrm;
      else u.row(i).setZero();
    }
    return u;
  };
  s.noalias() = unit(q) * unit(k).transpose();
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
