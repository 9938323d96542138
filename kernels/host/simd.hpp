// AVX2 building blocks shared by the host kernels (internal to kernels/host/).
#pragma once
#include <cstdint>

#if defined(__AVX2__)
#include <immintrin.h>

namespace kvsim::host {

// 8 rows of 8 floats (rows[j] + c) -> out[cc] = (rows[0][c+cc], ..., rows[7][c+cc]).
inline void transpose8(const float* const* rows, int64_t c, __m256* out) {
  const __m256 r0 = _mm256_loadu_ps(rows[0] + c), r1 = _mm256_loadu_ps(rows[1] + c);
  const __m256 r2 = _mm256_loadu_ps(rows[2] + c), r3 = _mm256_loadu_ps(rows[3] + c);
  const __m256 r4 = _mm256_loadu_ps(rows[4] + c), r5 = _mm256_loadu_ps(rows[5] + c);
  const __m256 r6 = _mm256_loadu_ps(rows[6] + c), r7 = _mm256_loadu_ps(rows[7] + c);
  const __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
  const __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
  const __m256 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
  const __m256 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
  const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
  const __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
  const __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
  const __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  out[0] = _mm256_permute2f128_ps(u0, u4, 0x20);
  out[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
  out[2] = _mm256_permute2f128_ps(u2, u6, 0x20);
  out[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
  out[4] = _mm256_permute2f128_ps(u0, u4, 0x31);
  out[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
  out[6] = _mm256_permute2f128_ps(u2, u6, 0x31);
  out[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}

// e^x for 8 floats where float accuracy is enough (attention weights; never a score that a selection is
// made from, which must use the reference's std::exp). x = k·ln2 + r with |r| <= ln2/2 (ln2 split in
// two parts so that k·ln2_hi is exact), e^r from its Taylor series to degree 6 (truncation r^7/7! <=
// 1.3e-7 relative), 2^k written into the exponent bits. x is clamped to [-87, 88], where 2^k is a
// normal float: callers map -inf and NaN themselves.
inline __m256 exp8(__m256 x) {
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.f)), _mm256_set1_ps(88.f));
  const __m256 k = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_sub_ps(x, _mm256_mul_ps(k, _mm256_set1_ps(0.693359375f)));
  r = _mm256_sub_ps(r, _mm256_mul_ps(k, _mm256_set1_ps(-2.12194440e-4f)));
  __m256 p = _mm256_set1_ps(1.f / 720.f);
  p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(1.f / 120.f));
  p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(1.f / 24.f));
  p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(1.f / 6.f));
  p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(0.5f));
  p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(1.f));
  p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(1.f));
  const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(k), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

}  // namespace kvsim::host
#endif
