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
  for (int64_t i = 0; i < n; ++i) {
    const int64_t b = std::max<int64_t>(0, i - k / 2), e = std::min<int64_t>(n, i - k / 2 + k);
    float acc = kind == Pool1D::max ? -INFINITY : 0.f;
    for (int64_t t = b; t < e; ++t) acc = kind == Pool1D::max ? std::max(acc, in[t]) : acc + in[t];
    out[i] = kind == Pool1D::max ? acc : acc / float(k);
  }
}

void chunk_sum(const float* scores, int64_t n, int chunk, float* out) {
  if (chunk <= 0) throw std::invalid_argument("chunk_sum: chunk");
  for (int64_t c = 0; c * chunk < n; ++c) {
    float s = 0.f;
    for (int64_t t = c * chunk; t < std::min<int64_t>(n, (c + 1) * chunk); ++t) s += scores[t];
    out[c] = s;
  }
}

}  // namespace kvsim::ref
