// CTKVR Obs. 1 on a trace: per (stored layer, query head), every pair of stored query rows, cosine
// against position distance. One normalized Gram matrix per head (Q̂ Q̂ᵀ, a GEMM) instead of pair loops.
#include <Eigen/Dense>
#include <algorithm>
#include <cmath>

#include "replay/studies.hpp"

namespace kvsim::replay {

namespace {
int bin_of(int64_t dist) {  // 1 -> 0, 2..3 -> 1, 4..7 -> 2, ...
  int b = 0;
  while ((int64_t(2) << b) <= dist) ++b;
  return b;
}
}  // namespace

QuerySimilarity query_similarity(const TraceData& t, double threshold) {
  QuerySimilarity out;
  out.threshold = threshold;
  out.rows = t.S;
  if (t.S < 2) return out;
  const int64_t max_dist = t.position(t.S - 1) - t.position(0);
  const int nb = bin_of(std::max<int64_t>(1, max_dist)) + 1;
  std::vector<double> sum(size_t(nb), 0), above(size_t(nb), 0);
  std::vector<int64_t> count(size_t(nb), 0);
  std::vector<std::vector<double>> layer_sum(size_t(t.layers), std::vector<double>(size_t(nb), 0));
  std::vector<std::vector<int64_t>> layer_count(size_t(t.layers), std::vector<int64_t>(size_t(nb), 0));
  using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  RowMat Q(t.S, t.d), G;
  for (int l = 0; l < t.layers; ++l)
    for (int qh = 0; qh < t.q_heads; ++qh) {
      for (int64_t s = 0; s < t.S; ++s) {
        Q.row(s) = Eigen::Map<const Eigen::RowVectorXf>(t.q(l, qh, s), t.d);
        const float n = Q.row(s).norm();
        if (n > 0) Q.row(s) /= n;
      }
      G.noalias() = Q * Q.transpose();
      for (int64_t a = 0; a < t.S; ++a)
        for (int64_t b = a + 1; b < t.S; ++b) {
          const int k = bin_of(t.position(b) - t.position(a));
          const double c = G(a, b);
          sum[size_t(k)] += c;
          above[size_t(k)] += c > threshold;
          ++count[size_t(k)];
          layer_sum[size_t(l)][size_t(k)] += c;
          ++layer_count[size_t(l)][size_t(k)];
        }
    }
  for (int k = 0; k < nb; ++k) {
    if (count[size_t(k)] == 0) continue;
    DistanceBin b;
    b.lo = int64_t(1) << k;
    b.hi = int64_t(2) << k;
    b.pairs = count[size_t(k)];
    b.mean = sum[size_t(k)] / double(b.pairs);
    b.share_above = above[size_t(k)] / double(b.pairs);
    b.layer_min = 1e300;
    b.layer_max = -1e300;
    for (int l = 0; l < t.layers; ++l)
      if (layer_count[size_t(l)][size_t(k)] > 0) {
        const double m = layer_sum[size_t(l)][size_t(k)] / double(layer_count[size_t(l)][size_t(k)]);
        b.layer_min = std::min(b.layer_min, m);
        b.layer_max = std::max(b.layer_max, m);
      }
    out.bins.push_back(b);
  }
  return out;
}

}  // namespace kvsim::replay
