#include "kernels/host/group_softmax.hpp"

#include <algorithm>
#include <cmath>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

namespace kvsim::host {

namespace {
// std::max(m, x) keeps m unless m < x: NaN is skipped. _mm256_max_ps(x, m) returns m unless x > m,
// the same per element. The maximum may come out as -0 where the reference's is +0 (or the reverse),
// which changes no exp(x - max) below.
float row_max(const float* r, int64_t n) {
  float mx = -INFINITY;
  int64_t i = 0;
#if defined(__AVX2__)
  __m256 m = _mm256_set1_ps(-INFINITY);
  for (; i + 8 <= n; i += 8) m = _mm256_max_ps(_mm256_loadu_ps(r + i), m);
  alignas(32) float t[8];
  _mm256_store_ps(t, m);
  for (float x : t) mx = std::max(mx, x);
#endif
  for (; i < n; ++i) mx = std::max(mx, r[i]);
  return mx;
}
}  // namespace

void group_softmax_max(float* S, int G, int64_t n, int64_t lds, float* A) {
  constexpr int kMaxG = 64;
  if (G <= 0) {  // the reference's maximum over no rows
    std::fill_n(A, n, -INFINITY);
    return;
  }
  float mx[kMaxG], inv[kMaxG];
  bool live[kMaxG];
  for (int g0 = 0; g0 < G; g0 += kMaxG) {
    const int gb = std::min(kMaxG, G - g0);
    for (int g = 0; g < gb; ++g) {
      mx[g] = row_max(S + (g0 + g) * lds, n);
      live[g] = mx[g] > -INFINITY;  // otherwise the reference's row is all 0
    }
    // The exps dominate: up to 4 rows at a time, so that their 4 double sums (each in key order, as the
    // reference adds) run as independent chains.
    for (int g = 0; g < gb; g += 4) {
      const int gr = std::min(4, gb - g);
      double s[4] = {0, 0, 0, 0};
      float* r[4];
      for (int j = 0; j < gr; ++j) r[j] = S + (g0 + g + j) * lds;
      if (gr == 4 && live[g] && live[g + 1] && live[g + 2] && live[g + 3]) {
        const float m0 = mx[g], m1 = mx[g + 1], m2 = mx[g + 2], m3 = mx[g + 3];
        for (int64_t i = 0; i < n; ++i) {
          s[0] += (r[0][i] = std::exp(r[0][i] - m0));
          s[1] += (r[1][i] = std::exp(r[1][i] - m1));
          s[2] += (r[2][i] = std::exp(r[2][i] - m2));
          s[3] += (r[3][i] = std::exp(r[3][i] - m3));
        }
      } else {
        for (int j = 0; j < gr; ++j) {
          if (!live[g + j]) continue;
          const float m = mx[g + j];
          for (int64_t i = 0; i < n; ++i) s[j] += (r[j][i] = std::exp(r[j][i] - m));
        }
      }
      for (int j = 0; j < gr; ++j) inv[g + j] = float(1.0 / s[j]);
    }
    // A = max over the rows of r·inv (a dead row is 0), in row order; the first block starts from -inf.
    for (int g = 0; g < gb; ++g) {
      float* r = S + (g0 + g) * lds;
      const bool first = g0 + g == 0;
      int64_t i = 0;
#if defined(__AVX2__)
      const __m256 vi = _mm256_set1_ps(inv[g]), z = _mm256_setzero_ps(), ninf = _mm256_set1_ps(-INFINITY);
      for (; i + 8 <= n; i += 8) {
        const __m256 v = live[g] ? _mm256_mul_ps(_mm256_loadu_ps(r + i), vi) : z;
        _mm256_storeu_ps(r + i, v);
        _mm256_storeu_ps(A + i, _mm256_max_ps(v, first ? ninf : _mm256_loadu_ps(A + i)));
      }
#endif
      for (; i < n; ++i) {
        const float v = live[g] ? r[i] * inv[g] : 0.f;
        r[i] = v;
        A[i] = std::max(first ? -INFINITY : A[i], v);
      }
    }
  }
}

}  // namespace kvsim::host
