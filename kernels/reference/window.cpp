#include "kernels/reference/window.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "kernels/reference/hd.hpp"

namespace kvsim::ref {

void obs_window_scores(const float* Qw, int G, int w, const float* K, int64_t n, int d, float scale, float* scores) {
  if (w <= 0 || w > n) throw std::invalid_argument("obs_window_scores: need 0 < w <= n");
  const int64_t prefix = n - w;
  std::fill_n(scores, prefix, 0.f);
  std::vector<float> row(static_cast<size_t>(n));
  for (int g = 0; g < G; ++g)
    for (int j = 0; j < w; ++j) {
      const float* q = Qw + (int64_t(g) * w + j) * d;
      const int64_t seen = prefix + j + 1;
      float mx = -INFINITY;
      for (int64_t i = 0; i < seen; ++i) mx = std::max(mx, row[size_t(i)] = scale * hd::dot(q, K + i * d, d));
      double s = 0;
      for (int64_t i = 0; i < seen; ++i) s += (row[size_t(i)] = std::exp(row[size_t(i)] - mx));
      const float inv = float(1.0 / s);
      for (int64_t i = 0; i < prefix; ++i) scores[i] += row[size_t(i)] * inv;
    }
}

void pool1d(const float* in, int64_t n, int k, Pool1D kind, float* out) {
  if (kind == Pool1D::none || k <= 1) {
    std::copy_n(in, n, out);
    return;
  }
  for (int64_t i = 0; i < n; ++i) out[i] = hd::pool1d_at(in, n, k, kind == Pool1D::max, i);
}

void chunk_sum(const float* scores, int64_t n, int chunk, float* out) {
  if (chunk <= 0) throw std::invalid_argument("chunk_sum: chunk");
  for (int64_t c = 0; c * chunk < n; ++c) out[c] = hd::chunk_sum_at(scores, n, chunk, c);
}

}  // namespace kvsim::ref
