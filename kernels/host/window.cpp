#include "kernels/host/window.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "kernels/host/dots.hpp"

namespace kvsim::host {

void obs_window_scores(const float* Qw, int G, int w, const float* K, int64_t n, int d, float scale, float* scores) {
  if (w <= 0 || w > n) throw std::invalid_argument("obs_window_scores: need 0 < w <= n");
  const int64_t prefix = n - w;
  std::fill_n(scores, prefix, 0.f);
  const int rows = G * w;  // row r = g * w + j, the reference's loop order
  // Rows in blocks whose score block stays within a few MiB; every row of a block is scored against all
  // n keys (a row j sees only prefix + j + 1 of them; the extra dots are never read).
  const int block = int(std::clamp<int64_t>((int64_t(1) << 20) / std::max<int64_t>(1, n), 4, 64));
  std::vector<float> S(size_t(block) * size_t(n));
  for (int r0 = 0; r0 < rows; r0 += block) {
    const int rb = std::min(block, rows - r0);
    exact_dots(Qw + int64_t(r0) * d, rb, d, K, nullptr, n, d, scale, S.data(), n);
    for (int r = 0; r < rb; ++r) {
      const int j = (r0 + r) % w;
      float* row = S.data() + int64_t(r) * n;
      const int64_t seen = prefix + j + 1;
      float mx = -INFINITY;
      for (int64_t i = 0; i < seen; ++i) mx = std::max(mx, row[i]);
      double s = 0;
      for (int64_t i = 0; i < seen; ++i) s += (row[i] = std::exp(row[i] - mx));
      const float inv = float(1.0 / s);
      for (int64_t i = 0; i < prefix; ++i) scores[i] += row[i] * inv;
    }
  }
}

}  // namespace kvsim::host
