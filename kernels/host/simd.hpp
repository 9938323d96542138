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

}  // namespace kvsim::host
#endif
