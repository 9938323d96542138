#include "kernels/host/attention.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "kernels/host/dots.hpp"
#include "kernels/host/simd.hpp"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#endif

namespace kvsim::host {

namespace {
constexpr int kBlock = 32;    // keys per block
constexpr int kMaxRows = 16;  // query rows per call handled in one pass (more: in passes)

void check_idx(const AttendRows& p) {
  if (!p.idx) return;
  for (int64_t i = 0; i < p.m; ++i)
    if (p.idx[i] < 0 || p.idx[i] >= p.n)
      throw std::out_of_range("gather_attention: index " + std::to_string(p.idx[i]) + " outside [0, " +
                              std::to_string(p.n) + ")");
}

#if defined(__AVX2__) && defined(__FMA__)
// out[r][c..c+32) += Σ_j w[r * kBlock + j] · v_j[c..c+32) for NR rows: 4·NR accumulators in registers
// (NR is a template argument so that the compiler can keep them there).
template <int NR>
inline void accumulate_slice(const float* w, const float* const* vrow, int nb, int c, float* out, int64_t d) {
  __m256 acc[NR][4];
  for (int r = 0; r < NR; ++r)
    for (int k = 0; k < 4; ++k) acc[r][k] = _mm256_setzero_ps();
  for (int j = 0; j < nb; ++j) {
    const float* v = vrow[j] + c;
    const __m256 v0 = _mm256_loadu_ps(v), v1 = _mm256_loadu_ps(v + 8), v2 = _mm256_loadu_ps(v + 16),
                 v3 = _mm256_loadu_ps(v + 24);
    for (int r = 0; r < NR; ++r) {
      const __m256 wj = _mm256_broadcast_ss(w + r * kBlock + j);
      acc[r][0] = _mm256_fmadd_ps(wj, v0, acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(wj, v1, acc[r][1]);
      acc[r][2] = _mm256_fmadd_ps(wj, v2, acc[r][2]);
      acc[r][3] = _mm256_fmadd_ps(wj, v3, acc[r][3]);
    }
  }
  for (int r = 0; r < NR; ++r)
    for (int k = 0; k < 4; ++k) {
      float* o = out + r * d + c + 8 * k;
      _mm256_storeu_ps(o, _mm256_add_ps(_mm256_loadu_ps(o), acc[r][k]));
    }
}

// All R rows (any count) for channels [0, d32) in 32-channel slices, two or three rows at a time.
inline void accumulate_rows(const float* w, const float* const* vrow, int nb, int R, int d32, float* out, int64_t d) {
  for (int c = 0; c < d32; c += 32) {
    int r = 0;
#if defined(__AVX512VL__)
    // 32 vector registers: 4 rows' 16 accumulators and the 4 value vectors fit, so each value row's
    // slice is loaded once per 4 rows (a GQA group of 4 in one sweep).
    for (; r + 4 <= R; r += 4) accumulate_slice<4>(w + r * kBlock, vrow, nb, c, out + r * d, d);
#endif
    for (; r + 3 <= R; r += 3) accumulate_slice<3>(w + r * kBlock, vrow, nb, c, out + r * d, d);
    if (R - r == 2) accumulate_slice<2>(w + r * kBlock, vrow, nb, c, out + r * d, d);
    if (R - r == 1) accumulate_slice<1>(w + r * kBlock, vrow, nb, c, out + r * d, d);
  }
}
#endif

#if defined(__AVX2__) && defined(__FMA__)
// lane i of the result = the sum of v[i]'s 8 lanes.
inline __m256 hsum8(const __m256* v) {
  const __m256 t0 = _mm256_hadd_ps(v[0], v[1]), t1 = _mm256_hadd_ps(v[2], v[3]);
  const __m256 t2 = _mm256_hadd_ps(v[4], v[5]), t3 = _mm256_hadd_ps(v[6], v[7]);
  const __m256 u0 = _mm256_hadd_ps(t0, t1), u1 = _mm256_hadd_ps(t2, t3);
  return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
}

// Logits of query rows Q[0, R) against the nb key rows krow[]: s[r·kBlock + j] = scale·(q_r·k_j).
// Attention needs float accuracy only, so the lanes run across channels (8 per FMA) and each dot ends
// with a horizontal sum: no transpose of the key rows, whose shuffles cost more than the dots for a
// GQA group of a few rows. 2 keys × 4 rows = 8 independent FMA chains, enough to fill both FMA pipes;
// a group of fewer than 4 rows (or a last odd key) repeats a row (key) and drops its result.
void block_logits(const float* Q, int R, int d, const float* const* krow, int nb, float scale, float* s,
                  const float* const* pk, const float* const* pv) {
  const int d8 = d & ~7;
  const __m256 vs = _mm256_set1_ps(scale);
  for (int r0 = 0; r0 < R; r0 += 4) {
    const float* q[4];
    for (int r = 0; r < 4; ++r) q[r] = Q + int64_t(std::min(r0 + r, R - 1)) * d;
    for (int j = 0; j < nb; j += 2) {
      if (r0 == 0)  // the K and V rows kPrefetch keys ahead, two per step (null past the end)
        for (int jj = j; jj < j + 2 && jj < nb; ++jj)
          if (pk[jj])
            for (int b = 0; b < d; b += 16) {
              _mm_prefetch(reinterpret_cast<const char*>(pk[jj] + b), _MM_HINT_T0);
              _mm_prefetch(reinterpret_cast<const char*>(pv[jj] + b), _MM_HINT_T0);
            }
      const float* k0 = krow[j];
      const float* k1 = krow[std::min(j + 1, nb - 1)];
      __m256 a[8];
      for (int t = 0; t < 8; ++t) a[t] = _mm256_setzero_ps();
      for (int c = 0; c < d8; c += 8) {
        const __m256 x0 = _mm256_loadu_ps(k0 + c), x1 = _mm256_loadu_ps(k1 + c);
        for (int r = 0; r < 4; ++r) {
          const __m256 qv = _mm256_loadu_ps(q[r] + c);
          a[r] = _mm256_fmadd_ps(qv, x0, a[r]);
          a[4 + r] = _mm256_fmadd_ps(qv, x1, a[4 + r]);
        }
      }
      alignas(32) float t[8];
      _mm256_store_ps(t, _mm256_mul_ps(vs, hsum8(a)));
      for (int c = d8; c < d; ++c)  // channels past the last multiple of 8
        for (int r = 0; r < 4; ++r) {
          t[r] += scale * q[r][c] * k0[c];
          t[4 + r] += scale * q[r][c] * k1[c];
        }
      for (int r = 0; r < 4 && r0 + r < R; ++r) {
        s[(r0 + r) * kBlock + j] = t[r];
        if (j + 1 < nb) s[(r0 + r) * kBlock + j + 1] = t[4 + r];
      }
    }
  }
}
#endif

// The online softmax over one block of logits sr[0, nb) of a row with running max `mx` and sum `l`:
// replaces the logits by their weights exp(s - max) and returns the factor the row's running output
// must be scaled by; false (weights 0, state unchanged) when the whole block is -inf or NaN. The
// weights need float accuracy only, so the exps are SIMD (exp8) 8 at a time; a -inf or NaN logit
// weighs 0.
inline bool fold_block(float* sr, int nb, float& mx, float& l, float& rescale) {
  float bm = -INFINITY;
  int j = 0;
#if defined(__AVX2__)
  __m256 vm = _mm256_set1_ps(-INFINITY);
  for (; j + 8 <= nb; j += 8) vm = _mm256_max_ps(_mm256_loadu_ps(sr + j), vm);  // NaN skipped, as std::max
  alignas(32) float t[8];
  _mm256_store_ps(t, vm);
  for (float x : t) bm = std::max(bm, x);
#endif
  for (; j < nb; ++j) bm = std::max(bm, sr[j]);
  if (!(bm > -INFINITY)) {
    for (j = 0; j < nb; ++j) sr[j] = 0.f;
    return false;
  }
  const float m_new = std::max(mx, bm);
  rescale = mx > -INFINITY ? std::exp(mx - m_new) : 0.f;
  float sum = 0.f;
  j = 0;
#if defined(__AVX2__)
  const __m256 vmn = _mm256_set1_ps(m_new), ninf = _mm256_set1_ps(-INFINITY);
  __m256 vs = _mm256_setzero_ps();
  for (; j + 8 <= nb; j += 8) {
    const __m256 x = _mm256_loadu_ps(sr + j);
    const __m256 w = _mm256_and_ps(exp8(_mm256_sub_ps(x, vmn)), _mm256_cmp_ps(x, ninf, _CMP_GT_OQ));
    _mm256_storeu_ps(sr + j, w);
    vs = _mm256_add_ps(vs, w);
  }
  _mm256_store_ps(t, vs);
  for (float x : t) sum += x;
#endif
  for (; j < nb; ++j) sum += (sr[j] = sr[j] > -INFINITY ? std::exp(sr[j] - m_new) : 0.f);
  l = l * rescale + sum;
  mx = m_new;
  return true;
}

// Keys a gathered row is prefetched ahead of its use: the rows of a gathered set are scattered (and a
// block's 64 row streams defeat the hardware prefetcher), so without it each key waits on DRAM. About
// 100 cycles of work per key, so 16 keys ahead covers DRAM latency while the 16 KiB in flight stay
// within L1 next to the current keys; issued two keys' rows at a time, not a block's in one burst,
// which fills the core's miss buffers and stalls it (measured: 8 keys ahead and a whole block ahead
// were slower on the 2-core VM).
constexpr int kPrefetch = 16;

// One low-rank segment (AttendSegment's factored form) folded into the running state of rows [0, R):
// z = k_vt·q per row, logits = scale·(k_us[i]·z) + bias, the values accumulated in rank space (u) and
// expanded through v_vt at the end. `s` is kMaxRows·kBlock scratch.
void attend_factored(const AttendSegment& p, int d, float scale, const float* Q, int R, float* s, float* mx, float* l,
                     float* out) {
  constexpr int kMaxRank = 256;
  const int rk = p.k_rank, rv = p.v_rank;
  if (rk > kMaxRank || rv > kMaxRank) throw std::invalid_argument("attend_segments: rank above 256");
  float z[kMaxRows * kMaxRank], u[kMaxRows * kMaxRank];
  for (int r = 0; r < R; ++r) {
    for (int j = 0; j < rk; ++j) {
      float a = 0.f;
      const float* vt = p.k_vt + int64_t(j) * d;
      const float* q = Q + int64_t(r) * d;
      for (int c = 0; c < d; ++c) a += vt[c] * q[c];
      z[r * kMaxRank + j] = a;
    }
    for (int j = 0; j < rv; ++j) u[r * kMaxRank + j] = 0.f;
  }
  for (int64_t i0 = 0; i0 < p.m; i0 += kBlock) {
    const int nb = int(std::min<int64_t>(kBlock, p.m - i0));
    for (int r = 0; r < R; ++r) {
      float* sr = s + r * kBlock;
      const float* zr = z + r * kMaxRank;
      for (int j = 0; j < nb; ++j) {
        const float* us = p.k_us + (i0 + j) * rk;
        float a = 0.f;
        for (int t = 0; t < rk; ++t) a += us[t] * zr[t];
        sr[j] = scale * a + (p.bias ? p.bias[i0 + j] : 0.f);
      }
      float rescale;
      if (!fold_block(sr, nb, mx[r], l[r], rescale)) continue;
      float* ur = u + r * kMaxRank;
      if (rescale != 1.f) {
        float* o = out + int64_t(r) * d;
        for (int c = 0; c < d; ++c) o[c] *= rescale;
        for (int t = 0; t < rv; ++t) ur[t] *= rescale;
      }
      for (int j = 0; j < nb; ++j) {
        const float* vs = p.v_us + (i0 + j) * rv;
        const float w = sr[j];
        for (int t = 0; t < rv; ++t) ur[t] += w * vs[t];
      }
    }
  }
  // out += u·v_vt.
  for (int r = 0; r < R; ++r) {
    float* o = out + int64_t(r) * d;
    const float* ur = u + r * kMaxRank;
    for (int t = 0; t < rv; ++t) {
      const float w = ur[t];
      const float* vt = p.v_vt + int64_t(t) * d;
      for (int c = 0; c < d; ++c) o[c] += w * vt[c];
    }
  }
}

// One pass over the segments for query rows Q[0, R) (R <= kMaxRows): one online softmax across all.
void attend_pass(const AttendSegment* segs, int nseg, int d, float scale, const float* Q, int R, float* out,
                 float* lse) {
  float s[kMaxRows * kBlock];
  float mx[kMaxRows], l[kMaxRows];
  for (int r = 0; r < R; ++r) {
    mx[r] = -INFINITY;
    l[r] = 0.f;
    std::fill_n(out + int64_t(r) * d, d, 0.f);
  }
  const float* vrow[kBlock];
  const float* krow[kBlock];
  const float *pk[kBlock], *pv[kBlock];
  (void)krow, (void)pk, (void)pv;
  for (int g = 0; g < nseg; ++g) {
  const AttendSegment& p = segs[g];
  if (!p.keys && p.m > 0) {
    attend_factored(p, d, scale, Q, R, s, mx, l, out);
    continue;
  }
  for (int64_t i0 = 0; i0 < p.m; i0 += kBlock) {
    const int nb = int(std::min<int64_t>(kBlock, p.m - i0));
    for (int j = 0; j < nb; ++j) vrow[j] = p.values + (p.idx ? int64_t(p.idx[i0 + j]) : i0 + j) * d;
#if defined(__AVX2__) && defined(__FMA__)
    for (int j = 0; j < nb; ++j) {
      krow[j] = p.keys + (p.idx ? int64_t(p.idx[i0 + j]) : i0 + j) * d;
      const int64_t a = i0 + j + kPrefetch;
      const int64_t row = a < p.m ? (p.idx ? int64_t(p.idx[a]) : a) : -1;
      pk[j] = row >= 0 ? p.keys + row * d : nullptr;
      pv[j] = row >= 0 ? p.values + row * d : nullptr;
    }
    block_logits(Q, R, d, krow, nb, scale, s, pk, pv);
#else
    if (p.idx) fast_dots(Q, R, d, p.keys, p.idx + i0, nb, d, scale, s, kBlock);
    else fast_dots(Q, R, d, p.keys + i0 * d, nullptr, nb, d, scale, s, kBlock);
#endif
    for (int r = 0; r < R; ++r) {
      float* sr = s + r * kBlock;
      if (p.bias)
        for (int j = 0; j < nb; ++j) sr[j] += p.bias[i0 + j];
      float rescale;
      if (!fold_block(sr, nb, mx[r], l[r], rescale)) continue;  // the whole block contributes nothing
      float* o = out + int64_t(r) * d;
      if (rescale != 1.f)
        for (int c = 0; c < d; ++c) o[c] *= rescale;
    }
    // out[r] += Σ_j p[r][j] · v_j, a 32-channel slice of every row at a time (registers).
#if defined(__AVX2__) && defined(__FMA__)
    const int d32 = d & ~31;
    accumulate_rows(s, vrow, nb, R, d32, out, d);
    int c = d32;
    for (; c < d; ++c)
      for (int r = 0; r < R; ++r) {
        float a = out[int64_t(r) * d + c];
        for (int j = 0; j < nb; ++j) a += s[r * kBlock + j] * vrow[j][c];
        out[int64_t(r) * d + c] = a;
      }
#else
    for (int r = 0; r < R; ++r) {
      float* o = out + int64_t(r) * d;
      for (int j = 0; j < nb; ++j) {
        const float w = s[r * kBlock + j];
        for (int c = 0; c < d; ++c) o[c] += w * vrow[j][c];
      }
    }
#endif
  }
  }
  for (int r = 0; r < R; ++r) {
    const float inv = l[r] > 0.f ? 1.f / l[r] : 0.f;
    float* o = out + int64_t(r) * d;
    for (int c = 0; c < d; ++c) o[c] *= inv;
    lse[r] = l[r] > 0.f ? mx[r] + std::log(l[r]) : -INFINITY;
  }
}
}  // namespace

void attend_rows(const AttendRows& p) {
  check_idx(p);
  const AttendSegment seg{p.keys, p.values, p.idx, p.bias, p.m};
  attend_segments(p.queries, p.rows, &seg, 1, p.d, p.scale, p.out, p.lse);
}

void attend_segments(const float* queries, int rows, const AttendSegment* segs, int nseg, int d, float scale,
                     float* out, float* lse) {
  for (int r0 = 0; r0 < rows; r0 += kMaxRows) {
    const int R = std::min(kMaxRows, rows - r0);
    attend_pass(segs, nseg, d, scale, queries + int64_t(r0) * d, R, out + int64_t(r0) * d, lse + r0);
  }
}

}  // namespace kvsim::host

namespace kvsim::host {

void weighted_rows(const WeightedRows& p) {
  const int d = p.d, R = p.rows;
  if (R > kMaxRows) throw std::invalid_argument("weighted_rows: at most 16 rows");
  if (!p.accumulate) {
    std::fill_n(p.out, size_t(R) * d, 0.f);
    for (int r = 0; r < R; ++r) p.mass[r] = 0;
  }
  float w[kMaxRows * kBlock];
  const float* vrow[kBlock];
  for (int64_t i0 = 0; i0 < p.m; i0 += kBlock) {
    const int nb = int(std::min<int64_t>(kBlock, p.m - i0));
    for (int j = 0; j < nb; ++j) vrow[j] = p.values + int64_t(p.idx[i0 + j]) * d;
    for (int r = 0; r < R; ++r) {
      double m = p.mass[r];
      for (int j = 0; j < nb; ++j) m += (w[r * kBlock + j] = p.weights[r][p.idx[i0 + j]]);
      p.mass[r] = m;
    }
#if defined(__AVX2__) && defined(__FMA__)
    const int d32 = d & ~31;
    accumulate_rows(w, vrow, nb, R, d32, p.out, d);
    int c = d32;
    for (; c < d; ++c)
      for (int r = 0; r < R; ++r) {
        float a = 0.f;
        for (int j = 0; j < nb; ++j) a += w[r * kBlock + j] * vrow[j][c];
        p.out[int64_t(r) * d + c] += a;
      }
#else
    for (int r = 0; r < R; ++r)
      for (int j = 0; j < nb; ++j)
        for (int c = 0; c < d; ++c) p.out[int64_t(r) * d + c] += w[r * kBlock + j] * vrow[j][c];
#endif
  }
}

}  // namespace kvsim::host
