#include "kernels/host/quest.hpp"

#include "kernels/host/simd.hpp"
#include "kernels/reference/hd.hpp"

namespace kvsim::host {

void quest_page_bound(const float* q, const float* kmin, const float* kmax, int64_t num_pages, int d, float* bound) {
  int64_t p0 = 0;
#if defined(__AVX2__)
  const int d8 = d & ~7;
  for (; p0 + 8 <= num_pages; p0 += 8) {
    const float* mn[8];
    const float* mx[8];
    for (int j = 0; j < 8; ++j) {
      mn[j] = kmin + (p0 + j) * d;
      mx[j] = kmax + (p0 + j) * d;
    }
    __m256 acc = _mm256_setzero_ps();
    for (int c = 0; c < d8; c += 8) {
      __m256 tn[8], tx[8];
      transpose8(mn, c, tn);
      transpose8(mx, c, tx);
      for (int cc = 0; cc < 8; ++cc) {
        const __m256 qv = _mm256_set1_ps(q[c + cc]);
        // hd::quest_channel_bound: a > b ? a : b, which is _mm256_max_ps(a, b) exactly (NaN included).
        acc = _mm256_add_ps(acc, _mm256_max_ps(_mm256_mul_ps(qv, tn[cc]), _mm256_mul_ps(qv, tx[cc])));
      }
    }
    for (int c = d8; c < d; ++c) {
      const __m256 qv = _mm256_set1_ps(q[c]);
      const __m256 vn = _mm256_set_ps(mn[7][c], mn[6][c], mn[5][c], mn[4][c], mn[3][c], mn[2][c], mn[1][c], mn[0][c]);
      const __m256 vx = _mm256_set_ps(mx[7][c], mx[6][c], mx[5][c], mx[4][c], mx[3][c], mx[2][c], mx[1][c], mx[0][c]);
      acc = _mm256_add_ps(acc, _mm256_max_ps(_mm256_mul_ps(qv, vn), _mm256_mul_ps(qv, vx)));
    }
    _mm256_storeu_ps(bound + p0, acc);
  }
#endif
  for (int64_t p = p0; p < num_pages; ++p) {
    float s = 0.f;
    for (int c = 0; c < d; ++c) s += ref::hd::quest_channel_bound(q[c], kmin[p * d + c], kmax[p * d + c]);
    bound[p] = s;
  }
}

}  // namespace kvsim::host
