#include "kernels/reference/pooling.hpp"

#include <algorithm>
#include <stdexcept>

namespace kvsim::ref {

namespace {
void check_starts(std::span<const int32_t> starts, int64_t n) {
  for (size_t s = 0; s < starts.size(); ++s) {
    if (starts[s] < 0 || starts[s] >= n) throw std::invalid_argument("segment start outside [0, n)");
    if (s > 0 && starts[s] <= starts[s - 1]) throw std::invalid_argument("segment starts not strictly increasing");
  }
}
int64_t seg_end(std::span<const int32_t> starts, size_t s, int64_t n) { return s + 1 < starts.size() ? starts[s + 1] : n; }
}  // namespace

void segment_mean(const float* X, int64_t n, int d, std::span<const int32_t> starts, float* out) {
  check_starts(starts, n);
  for (size_t s = 0; s < starts.size(); ++s) {
    float* o = out + int64_t(s) * d;
    std::fill_n(o, d, 0.f);
    const int64_t b = starts[s], e = seg_end(starts, s, n);
    for (int64_t t = b; t < e; ++t)
      for (int c = 0; c < d; ++c) o[c] += X[t * d + c];
    for (int c = 0; c < d; ++c) o[c] /= float(e - b);
  }
}

void segment_weighted_mean(const float* X, const float* w, int64_t n, int d, std::span<const int32_t> starts,
                           float* out) {
  check_starts(starts, n);
  for (size_t s = 0; s < starts.size(); ++s) {
    const int64_t b = starts[s], e = seg_end(starts, s, n);
    double wsum = 0;
    for (int64_t t = b; t < e; ++t) wsum += w[t];
    if (wsum == 0) {
      const int32_t one[1] = {0};
      segment_mean(X + b * d, e - b, d, one, out + int64_t(s) * d);
      continue;
    }
    float* o = out + int64_t(s) * d;
    std::fill_n(o, d, 0.f);
    for (int64_t t = b; t < e; ++t)
      for (int c = 0; c < d; ++c) o[c] += w[t] * X[t * d + c];
    for (int c = 0; c < d; ++c) o[c] = float(o[c] / wsum);
  }
}

std::vector<int32_t> page_starts(int64_t n, int page_size) {
  std::vector<int32_t> s;
  for (int64_t t = 0; t < n; t += page_size) s.push_back(int32_t(t));
  return s;
}

void page_mean(const float* X, int64_t n, int d, int page_size, float* out) {
  if (page_size <= 0) throw std::invalid_argument("page_mean: page_size");
  segment_mean(X, n, d, page_starts(n, page_size), out);
}

void group_mean(const float* X, int64_t m, int d, int group, float* out) { page_mean(X, m, d, group, out); }

void tail_mean(const float* X, int64_t m, int d, int64_t w, float* out) {
  const int64_t b = std::max<int64_t>(0, m - std::max<int64_t>(w, 1));
  const int32_t one[1] = {0};
  segment_mean(X + b * d, m - b, d, one, out);
}

void chess_page_vectors(std::span<const float* const> sources, int64_t n, int d, int page_size, float* out) {
  const int64_t P = (n + page_size - 1) / page_size;
  const int64_t S = int64_t(sources.size());
  std::vector<float> tmp(size_t(P * d));
  for (int64_t s = 0; s < S; ++s) {
    page_mean(sources[size_t(s)], n, d, page_size, tmp.data());
    for (int64_t p = 0; p < P; ++p) std::copy_n(tmp.data() + p * d, d, out + p * S * d + s * d);
  }
}

}  // namespace kvsim::ref
