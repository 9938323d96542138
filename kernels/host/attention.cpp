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

#if defined(__AVX512F__) && defined(__AVX512DQ__) && defined(__FMA__)
// GCC 12's own avx512fintrin.h (_mm512_broadcast_f32x4, _mm512_shuffle_f32x4) starts its results from
// an intentionally undefined vector, which -Wmaybe-uninitialized reports at every use.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// The one-pass kernel (AVX-512), which takes every plain segment when d is a multiple of 16: keys in
// steps of 4·kOneSteps = 8, and each step does all of its keys' work — the K rows' logits for a quad of
// query rows, the online-softmax update, the V rows accumulated into the output — before the next
// step. Why not blocks of 32 (the path below, still the one without AVX-512): a block's logits, then
// its softmax, then its values read the rows in two bursts with the arithmetic in between, and kept a
// gathered set at 0.28–0.44 of the DRAM ceiling while the same reads with the same FMAs interleaved
// reach 0.68–0.75 (docs/validation/cpu.md, second pass). Here rows ahead are prefetched one line per
// 16-channel chunk inside the current step's loops, so reads are in flight through the whole step:
// the next step's K rows in its logits, and the V rows two steps ahead in its values. Measured
// (docs/validation/cpu.md, third pass): K rows one step ahead beat two (31–45 against 29–33 GB/s);
// V rows two steps ahead beat one (median 40.9 against 35.5 GB/s over six alternated runs), three
// were no better; half a step is too late (20 GB/s). 12-key steps, prefetcht1, an extra prefetcht1
// further ahead and every other line were no better.
// The 16 lanes of a logit vector are 4 query rows × 4 keys, so a step's softmax is a few vector ops.
constexpr int kOneSteps = 2;    // logit vectors (4 keys each) per step
constexpr int kMaxOneD = 512;   // head dims up to this take the one-pass kernel (scratch for padded rows)

// e^x for 16 floats: exp8 on each half (float accuracy; callers map -inf and NaN).
inline __m512 exp16(__m512 x) {
  const __m256 lo = exp8(_mm512_castps512_ps256(x)), hi = exp8(_mm512_extractf32x8_ps(x, 1));
  return _mm512_insertf32x8(_mm512_castps256_ps512(lo), hi, 1);
}

// Lane 4r + k of the result = the sum of a[4k + r]'s 16 lanes: the 16 dot products of a key quad
// (k) and a row quad (r) reduced in one shuffle tree (15 adds instead of 16 separate reductions),
// ending row-major so that a row's 4 logits share a 128-bit lane for the in-lane max below.
inline __m512 sum_lanes(const __m512* a) {
  __m512 h[8], g[4];
  for (int i = 0; i < 8; ++i)  // quarters [x0+x2, x1+x3, y0+y2, y1+y3]
    h[i] = _mm512_add_ps(_mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], 0x44),
                         _mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], 0xEE));
  for (int j = 0; j < 4; ++j)  // quarter q = 4-lane partial of a[4j + q]
    g[j] = _mm512_add_ps(_mm512_shuffle_f32x4(h[2 * j], h[2 * j + 1], 0x88),
                         _mm512_shuffle_f32x4(h[2 * j], h[2 * j + 1], 0xDD));
  const __m512 e0 = _mm512_add_ps(_mm512_shuffle_ps(g[0], g[1], 0x88), _mm512_shuffle_ps(g[0], g[1], 0xDD));
  const __m512 e1 = _mm512_add_ps(_mm512_shuffle_ps(g[2], g[3], 0x88), _mm512_shuffle_ps(g[2], g[3], 0xDD));
  return _mm512_add_ps(_mm512_shuffle_ps(e0, e1, 0x88), _mm512_shuffle_ps(e0, e1, 0xDD));
}

// Unscaled logits of query rows q[0, 4) against key rows k[0, 4), lane 4r + j = q_r·k_j: 16 FMA chains
// over 16-channel chunks. Each chunk also prefetches one line of each of the npf rows pf[] (one
// line per chunk: a row of d floats is d/16 lines), so the reads of later keys are spread over the
// step instead of issued in a burst that fills the miss buffers.
inline __m512 quad_logits(const float* const* q, const float* const* k, int d, const float* const* pf, int npf) {
  __m512 a[16];
  for (auto& x : a) x = _mm512_setzero_ps();
  for (int c = 0; c < d; c += 16) {
    for (int t = 0; t < npf; ++t) _mm_prefetch(reinterpret_cast<const char*>(pf[t] + c), _MM_HINT_T0);
    const __m512 k0 = _mm512_loadu_ps(k[0] + c), k1 = _mm512_loadu_ps(k[1] + c), k2 = _mm512_loadu_ps(k[2] + c),
                 k3 = _mm512_loadu_ps(k[3] + c);
    for (int r = 0; r < 4; ++r) {
      const __m512 qv = _mm512_loadu_ps(q[r] + c);
      a[r] = _mm512_fmadd_ps(qv, k0, a[r]);
      a[4 + r] = _mm512_fmadd_ps(qv, k1, a[4 + r]);
      a[8 + r] = _mm512_fmadd_ps(qv, k2, a[8 + r]);
      a[12 + r] = _mm512_fmadd_ps(qv, k3, a[12 + r]);
    }
  }
  // A row not 64-byte aligned spans one line more than d/16: its last line.
  for (int t = 0; t < npf; ++t) _mm_prefetch(reinterpret_cast<const char*>(pf[t] + d - 1), _MM_HINT_T0);
  return sum_lanes(a);
}

// Running softmax state of a row quad: mx lanes 4r..4r+3 all hold row r's running max, l lane 4r + j
// the sum of row r's weights in key slot j (summed per row at the end).
struct QuadState {
  __m512 mx, l;
};

// Folds a step's NV logit vectors s[v] (lane 4r + j: row r, key 4v + j; -inf for an absent key) into the
// state and replaces them by their weights exp(s - max). A NaN logit weighs 0 and leaves the max alone,
// as in fold_block. The outputs o[r] (d floats) are rescaled when a row's max rises: with the max of a
// whole step at a time that happens on few steps once the first keys are in.
template <int NV>
inline void fold_step(__m512* s, QuadState& st, float* const* o, int d) {
  const __m512 ninf = _mm512_set1_ps(-INFINITY);
  __m512 gm = ninf;
  for (int v = 0; v < NV; ++v) {
    s[v] = _mm512_mask_mov_ps(s[v], _mm512_cmp_ps_mask(s[v], s[v], _CMP_UNORD_Q), ninf);
    gm = _mm512_max_ps(gm, s[v]);
  }
  gm = _mm512_max_ps(gm, _mm512_permute_ps(gm, 0xB1));  // max over each row's 4 lanes
  gm = _mm512_max_ps(gm, _mm512_permute_ps(gm, 0x4E));
  const __m512 nm = _mm512_max_ps(st.mx, gm);
  if (_mm512_cmp_ps_mask(nm, st.mx, _CMP_GT_OQ)) {
    // A row with nothing accumulated yet (max -inf) has l = 0 and a zero output: factor 0, not NaN.
    const __m512 f = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(st.mx, ninf, _CMP_GT_OQ), exp16(_mm512_sub_ps(st.mx, nm)));
    st.l = _mm512_mul_ps(st.l, f);
    alignas(64) float fs[16];
    _mm512_store_ps(fs, f);
    for (int r = 0; r < 4; ++r)
      if (fs[4 * r] != 1.f) {
        const __m512 fr = _mm512_set1_ps(fs[4 * r]);
        for (int c = 0; c < d; c += 16) _mm512_storeu_ps(o[r] + c, _mm512_mul_ps(fr, _mm512_loadu_ps(o[r] + c)));
      }
    st.mx = nm;
  }
  for (int v = 0; v < NV; ++v) {
    s[v] = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(s[v], ninf, _CMP_GT_OQ), exp16(_mm512_sub_ps(s[v], st.mx)));
    st.l = _mm512_add_ps(st.l, s[v]);
  }
}

// o[r] += Σ_j w[r][j] · v_j over the step's 4·NV keys for the 4 rows of a quad: each output chunk is
// loaded and stored once per step, and its sum is a tree (two chains) so that the FMAs' latency does
// not serialize a chunk. A line of each of the npf rows pf[] is prefetched per chunk, as in quad_logits.
template <int NV>
inline void step_values(const __m512* w, const float* const* v, float* const* o, int d, const float* const* pf,
                        int npf) {
  constexpr int nk = 4 * NV;
  alignas(64) float ws[16 * NV];  // ws[16v + 4r + j]: row r, key 4v + j
  for (int i = 0; i < NV; ++i) _mm512_store_ps(ws + 16 * i, w[i]);
  for (int c = 0; c < d; c += 16) {
    for (int t = 0; t < npf; ++t) _mm_prefetch(reinterpret_cast<const char*>(pf[t] + c), _MM_HINT_T0);
    __m512 x[nk];
    for (int j = 0; j < nk; ++j) x[j] = _mm512_loadu_ps(v[j] + c);
    for (int r = 0; r < 4; ++r) {
      __m512 a0 = _mm512_loadu_ps(o[r] + c), a1 = _mm512_setzero_ps();
      for (int j = 0; j < nk; j += 2) {
        a0 = _mm512_fmadd_ps(_mm512_set1_ps(ws[16 * (j / 4) + 4 * r + j % 4]), x[j], a0);
        a1 = _mm512_fmadd_ps(_mm512_set1_ps(ws[16 * (j / 4) + 4 * r + j % 4 + 1]), x[j + 1], a1);
      }
      _mm512_storeu_ps(o[r] + c, _mm512_add_ps(a0, a1));
    }
  }
}

inline bool onepass_fits(const AttendSegment& p, int d) { return p.keys && d % 16 == 0 && d <= kMaxOneD; }

// Row quads of attend_onepass: query rows, output rows and state, loaded from and stored back to
// attend_pass's scalar state. A last partial quad repeats its last query row and writes that row's
// copies into scratch (`pad`, 4·d floats).
struct RowQuads {
  int n = 0;
  const float* q[kMaxRows / 4][4];
  float* o[kMaxRows / 4][4];
  QuadState st[kMaxRows / 4];

  RowQuads(const float* Q, int R, int d, const float* mx, const float* l, float* out, float* pad) : n((R + 3) / 4) {
    for (int g = 0; g < n; ++g) {
      alignas(64) float m0[16], l0[16];
      for (int r = 0; r < 4; ++r) {
        const int row = 4 * g + r;
        q[g][r] = Q + int64_t(std::min(row, R - 1)) * d;
        o[g][r] = row < R ? out + int64_t(row) * d : pad + r * d;
        if (row >= R) std::fill_n(pad + r * d, d, 0.f);
        for (int j = 0; j < 4; ++j) {
          m0[4 * r + j] = row < R ? mx[row] : -INFINITY;
          l0[4 * r + j] = row < R && j == 0 ? l[row] : 0.f;
        }
      }
      st[g] = {_mm512_load_ps(m0), _mm512_load_ps(l0)};
    }
  }
  void store(int R, float* mx, float* l) const {
    for (int g = 0; g < n; ++g) {
      alignas(64) float m0[16], l0[16];
      _mm512_store_ps(m0, st[g].mx);
      _mm512_store_ps(l0, st[g].l);
      for (int r = 0; r < 4 && 4 * g + r < R; ++r) {
        mx[4 * g + r] = m0[4 * r];
        l[4 * g + r] = (l0[4 * r] + l0[4 * r + 1]) + (l0[4 * r + 2] + l0[4 * r + 3]);
      }
    }
  }
};

// One plain segment in one pass, continuing the running state mx[r], l[r] and out of rows [0, R)
// (attend_pass's), 4·NV keys per step. A last partial step repeats its last key with logit -inf. The
// rows ahead are prefetched during the first row quad's work (the other quads find them in L1).
// Not inlined: inlined into attend_pass, next to the block path, GCC spilled the key vectors of
// quad_logits to the stack (103 against 73 cycles per key on L1-resident rows).
template <int NV>
__attribute__((noinline)) void attend_onepass(const AttendSegment& p, int d, float scale, const float* Q, int R,
                                              float* mx, float* l, float* out) {
  constexpr int nk = 4 * NV;
  alignas(64) float pad[4 * kMaxOneD];
  RowQuads rq(Q, R, d, mx, l, out, pad);
  const __m512 vscale = _mm512_set1_ps(scale), ninf = _mm512_set1_ps(-INFINITY);
  auto key = [&](int64_t i) { return p.idx ? int64_t(p.idx[i]) : i; };
  for (int64_t i = 0; i < p.m; i += nk) {
    const int nb = int(std::min<int64_t>(nk, p.m - i));
    const float *kr[nk], *vr[nk], *pk[nk], *pv[nk];
    for (int j = 0; j < nk; ++j) {
      const int64_t row = key(i + std::min(j, nb - 1));
      kr[j] = p.keys + row * d;
      vr[j] = p.values + row * d;
    }
    int npf = 0, npv = 0;  // the next step's K rows, the V rows of the step after it
    for (; npf < nk && i + nk + npf < p.m; ++npf) pk[npf] = p.keys + key(i + nk + npf) * d;
    for (; npv < nk && i + 2 * nk + npv < p.m; ++npv) pv[npv] = p.values + key(i + 2 * nk + npv) * d;
    alignas(64) float b[nk] = {};
    if (p.bias) std::copy_n(p.bias + i, nb, b);
    for (int g = 0; g < rq.n; ++g) {
      __m512 s[NV];
      for (int v = 0; v < NV; ++v) {
        const int kp = g == 0 ? std::clamp(npf - 4 * v, 0, 4) : 0;  // this quad's share of the K prefetches
        s[v] = _mm512_fmadd_ps(quad_logits(rq.q[g], kr + 4 * v, d, pk + 4 * v, kp), vscale,
                               _mm512_broadcast_f32x4(_mm_load_ps(b + 4 * v)));
        const int present = std::clamp(nb - 4 * v, 0, 4);
        s[v] = _mm512_mask_mov_ps(ninf, __mmask16(0x1111 * ((1u << present) - 1)), s[v]);
      }
      fold_step<NV>(s, rq.st[g], rq.o[g], d);
      step_values<NV>(s, vr, rq.o[g], d, pv, g == 0 ? npv : 0);
    }
  }
  rq.store(R, mx, l);
}
#pragma GCC diagnostic pop
#endif

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
#if defined(__AVX512F__) && defined(__AVX512DQ__) && defined(__FMA__)
  if (onepass_fits(p, d)) {
    attend_onepass<kOneSteps>(p, d, scale, Q, R, mx, l, out);
    continue;
  }
#endif
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
