#include "kernels/host/dots.hpp"

#include <algorithm>
#include <cmath>

#include "kernels/reference/hd.hpp"

#include "kernels/host/simd.hpp"

namespace kvsim::host {

namespace {

void scalar_dots(const float* Q, int R, int64_t ldq, const float* K, const int32_t* idx, int64_t i0, int64_t n, int d,
                 float scale, float* S, int64_t lds) {
  for (int64_t i = i0; i < n; ++i) {
    const float* k = K + (idx ? int64_t(idx[i]) : i) * d;
    for (int r = 0; r < R; ++r) S[r * lds + i] = scale * ref::hd::dot(Q + r * ldq, k, d);
  }
}

#if defined(__AVX2__)
constexpr int kTile = 16;  // keys per tile: two 8-lane vectors
constexpr int kMaxD = 512;  // head_dim above this takes the scalar path
constexpr int kAhead = 2;  // tiles ahead a gathered tile's rows are prefetched

// The tile's keys transposed: T[c * 16 + j] = key j's channel c. The prefetches of a later tile's rows
// (pf, null for none) are spread over the transpose's steps: issued in one burst they fill the core's
// miss buffers and stall it until DRAM answers, so that no dot runs meanwhile.
void transpose_tile(const float* const* rows, int d, float* T, const float* const* pf) {
  const int d8 = d & ~7;
  const int lines = (d * 4 + 63) / 64, total = pf ? kTile * lines : 0, steps = std::max(1, 2 * (d8 / 8));
  int issued = 0, step = 0;
  for (int half = 0; half < 2; ++half) {
    const float* const* rh = rows + half * 8;
    for (int c = 0; c < d8; c += 8) {
      for (const int until = total * ++step / steps; issued < until; ++issued)
        _mm_prefetch(reinterpret_cast<const char*>(pf[issued / lines]) + (issued % lines) * 64, _MM_HINT_T0);
      __m256 v[8];
      transpose8(rh, c, v);
      for (int cc = 0; cc < 8; ++cc) _mm256_store_ps(T + (c + cc) * kTile + half * 8, v[cc]);
    }
    for (int c = d8; c < d; ++c)
      for (int j = 0; j < 8; ++j) T[c * kTile + half * 8 + j] = rh[j][c];
  }
  for (; issued < total; ++issued)
    _mm_prefetch(reinterpret_cast<const char*>(pf[issued / lines]) + (issued % lines) * 64, _MM_HINT_T0);
}

// Rows r0..r0+NR-1 of Q against the transposed tile; NR independent pairs of chains. Fused: one FMA per
// multiply-add (not the reference's rounding; for attention, whose outputs only need float accuracy).
template <int NR, bool Fused>
inline void rows_vs_tile(const float* Q, int64_t ldq, const float* T, int d, float scale, float* S, int64_t lds) {
  __m256 a[NR][2];
  for (int r = 0; r < NR; ++r) a[r][0] = a[r][1] = _mm256_setzero_ps();
  for (int c = 0; c < d; ++c) {
    const __m256 k0 = _mm256_load_ps(T + c * kTile), k1 = _mm256_load_ps(T + c * kTile + 8);
    for (int r = 0; r < NR; ++r) {
      const __m256 q = _mm256_broadcast_ss(Q + r * ldq + c);
#if defined(__FMA__)
      if constexpr (Fused) {
        a[r][0] = _mm256_fmadd_ps(q, k0, a[r][0]);
        a[r][1] = _mm256_fmadd_ps(q, k1, a[r][1]);
        continue;
      }
#endif
      a[r][0] = _mm256_add_ps(a[r][0], _mm256_mul_ps(q, k0));
      a[r][1] = _mm256_add_ps(a[r][1], _mm256_mul_ps(q, k1));
    }
  }
  const __m256 s = _mm256_set1_ps(scale);
  for (int r = 0; r < NR; ++r) {
    _mm256_storeu_ps(S + r * lds, _mm256_mul_ps(s, a[r][0]));
    _mm256_storeu_ps(S + r * lds + 8, _mm256_mul_ps(s, a[r][1]));
  }
}
#endif

template <bool Fused>
void dots(const float* Q, int R, int64_t ldq, const float* K, const int32_t* idx, int64_t n, int d, float scale,
          float* S, int64_t lds) {
  if (R <= 0 || n <= 0) return;
#if defined(__AVX2__)
  if (d > kMaxD) return scalar_dots(Q, R, ldq, K, idx, 0, n, d, scale, S, lds);
  alignas(32) float T[kMaxD * kTile];  // 32 KiB: the transposed tile stays in L1
  const int64_t tiles = n / kTile;
  const float* rows[kTile];
  for (int64_t t = 0; t < tiles; ++t) {
    const int64_t i0 = t * kTile;
    for (int j = 0; j < kTile; ++j) rows[j] = K + (idx ? int64_t(idx[i0 + j]) : i0 + j) * d;
    // Prefetch the tile kAhead tiles on: 16 scattered row streams defeat the hardware prefetcher.
    const float* pf[kTile];
    const bool ahead = t + kAhead < tiles;
    if (ahead)
      for (int j = 0; j < kTile; ++j) {
        const int64_t a = i0 + kAhead * kTile + j;
        pf[j] = K + (idx ? int64_t(idx[a]) : a) * d;
      }
    transpose_tile(rows, d, T, ahead ? pf : nullptr);
    int r = 0;
    for (; r + 4 <= R; r += 4) rows_vs_tile<4, Fused>(Q + r * ldq, ldq, T, d, scale, S + r * lds + i0, lds);
    switch (R - r) {
      case 3: rows_vs_tile<3, Fused>(Q + r * ldq, ldq, T, d, scale, S + r * lds + i0, lds); break;
      case 2: rows_vs_tile<2, Fused>(Q + r * ldq, ldq, T, d, scale, S + r * lds + i0, lds); break;
      case 1: rows_vs_tile<1, Fused>(Q + r * ldq, ldq, T, d, scale, S + r * lds + i0, lds); break;
      default: break;
    }
  }
  scalar_dots(Q, R, ldq, K, idx, tiles * kTile, n, d, scale, S, lds);
#else
  scalar_dots(Q, R, ldq, K, idx, 0, n, d, scale, S, lds);
#endif
}

}  // namespace

void exact_dots(const float* Q, int R, int64_t ldq, const float* K, const int32_t* idx, int64_t n, int d, float scale,
                float* S, int64_t lds) {
  dots<false>(Q, R, ldq, K, idx, n, d, scale, S, lds);
}

void fast_dots(const float* Q, int R, int64_t ldq, const float* K, const int32_t* idx, int64_t n, int d, float scale,
               float* S, int64_t lds) {
  dots<true>(Q, R, ldq, K, idx, n, d, scale, S, lds);
}

}  // namespace kvsim::host
