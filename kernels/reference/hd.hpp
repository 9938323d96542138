// Per-element logic shared by the host reference (*.cpp) and the simple CUDA kernels (*.cu), so both
// are visibly the same arithmetic. KVSIM_HD is `__host__ __device__` under nvcc and empty elsewhere.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define KVSIM_HD __host__ __device__
#else
#define KVSIM_HD
#endif

namespace kvsim::ref::hd {

KVSIM_HD inline float neg_inf() { return -INFINITY; }

KVSIM_HD inline float dot(const float* a, const float* b, int d) {
  float s = 0.f;
  for (int i = 0; i < d; ++i) s += a[i] * b[i];
  return s;
}

// Online softmax (the running state of a decode-attention row): m = max logit so far, l = Σ exp(s - m).
// push() folds one logit in and says how to update the running numerator acc (acc = acc*rescale + p*v).
// Logits of -inf (or NaN) contribute nothing.
struct OnlineSoftmax {
  float m = -INFINITY;
  float l = 0.f;
  KVSIM_HD void push(float s, float& rescale, float& p) {
    if (!(s > -INFINITY)) {
      rescale = 1.f;
      p = 0.f;
      return;
    }
    const float m_new = s > m ? s : m;
    rescale = expf(m - m_new);  // 0 when m was -inf
    p = expf(s - m_new);
    l = l * rescale + p;
    m = m_new;
  }
  // 1/l for normalizing the numerator (0 for an empty row) and the log-sum-exp (-inf for an empty row).
  KVSIM_HD float inv_l() const { return l > 0.f ? 1.f / l : 0.f; }
  KVSIM_HD float lse() const { return l > 0.f ? m + logf(l) : -INFINITY; }
};

// Weights for merging two normalized partial outputs (o_a, lse_a), (o_b, lse_b):
// lse = log(e^lse_a + e^lse_b), o = o_a·e^(lse_a - lse) + o_b·e^(lse_b - lse). Either side may be empty
// (lse = -inf); both empty gives weights 0 and lse -inf.
KVSIM_HD inline float merge_weights(float lse_a, float lse_b, float& wa, float& wb) {
  const float m = lse_a > lse_b ? lse_a : lse_b;
  if (!(m > -INFINITY)) {
    wa = wb = 0.f;
    return -INFINITY;
  }
  const float ea = expf(lse_a - m), eb = expf(lse_b - m);
  const float s = ea + eb;
  wa = ea / s;
  wb = eb / s;
  return m + logf(s);
}

// Quest's per-channel upper bound of q_i·k_i over a page whose channel-i keys lie in [mn, mx].
KVSIM_HD inline float quest_channel_bound(float q, float mn, float mx) {
  const float a = q * mn, b = q * mx;
  return a > b ? a : b;
}

// Ranking order used by every top-k: higher score first, ties broken by lower index; NaN ranks last.
KVSIM_HD inline bool ranks_before(float sa, int64_t ia, float sb, int64_t ib) {
  const bool na = sa != sa, nb = sb != sb;
  if (na != nb) return nb;  // a non-NaN before a NaN
  if (!na && sa != sb) return sa > sb;
  return ia < ib;
}

// ranks_before as one unsigned 64-bit word, so a selection compares plain words instead of chasing
// indices into the scores (and a radix select can walk its bits): high word = the score mapped to an
// order-reversed unsigned key (higher score -> smaller; -0 = +0; NaN last), low word = the index (ties
// by the lower index). Ascending words are exactly the ranking. `unsigned long long` (not uint64_t) is
// the type CUDA's 64-bit atomics and shuffles take.
KVSIM_HD inline unsigned long long rank_word(float f, int32_t i) {
  uint32_t key = 0;  // NaN: ranks last
  if (f == f) {
    if (f == 0.f) f = 0.f;  // -0 ties with +0, as ranks_before has it
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    key = (u & 0x80000000u) ? ~u : (u | 0x80000000u);  // ascending in f
  }
  return (static_cast<unsigned long long>(~key) << 32) | uint32_t(i);
}

// How many of n candidates a retention ratio rho keeps (select.hpp's quantile_keep_count, which
// documents the rule): ceil(rho·n), with rho·n within 1e-9 (relative) of an integer counting as that
// integer; rho clamped to [0, 1], NaN as 0. Host and device: the CUDA selection launchers call it on the
// host, and chess_select.cu's select kernel on the device for the survivors it counts there. The same
// double operations (one product, round, ceil, fabs: all exact or correctly rounded in IEEE 754) give
// the same count on both — provided the product is rounded on its own: nvcc would otherwise contract
// x - r below into fma(rho, n, -r), so the device spells the product __dmul_rn, which is never fused.
KVSIM_HD inline int64_t keep_count(double rho, int64_t n) {
  if (n <= 0) return 0;
  rho = rho != rho ? 0.0 : (rho < 0.0 ? 0.0 : (rho > 1.0 ? 1.0 : rho));
#if defined(__CUDA_ARCH__)
  const double x = __dmul_rn(rho, double(n));
#else
  const double x = rho * double(n);
#endif
  const double r = ::round(x);
  const int64_t k = ::fabs(x - r) <= 1e-9 * (x > 1.0 ? x : 1.0) ? int64_t(r) : int64_t(::ceil(x));
  return k < 0 ? 0 : (k > n ? n : k);
}

// SnapKV's 1-D pooling at output i (window.hpp's pool1d: kernel k, stride 1, padding k/2, clipped to
// [0, n); avg divides by k, count_include_pad). Callers handle k <= 1 (a copy).
KVSIM_HD inline float pool1d_at(const float* in, int64_t n, int k, bool is_max, int64_t i) {
  const int64_t b0 = i - k / 2, e0 = i - k / 2 + k;
  const int64_t b = b0 > 0 ? b0 : 0, e = e0 < n ? e0 : n;
  float acc = is_max ? -INFINITY : 0.f;
  for (int64_t t = b; t < e; ++t) acc = is_max ? (in[t] > acc ? in[t] : acc) : acc + in[t];
  return is_max ? acc : acc / float(k);
}

// ChunkKV's chunk score: the sum of the token scores of chunk c (chunk tokens, the last one partial).
KVSIM_HD inline float chunk_sum_at(const float* scores, int64_t n, int chunk, int64_t c) {
  const int64_t b = c * chunk, e0 = (c + 1) * chunk, e = e0 < n ? e0 : n;
  float s = 0.f;
  for (int64_t t = b; t < e; ++t) s += scores[t];
  return s;
}

// SEKV's span summary (eq. 3): W·k-bar for W [d, d_proj] row-major, each component summed in double and
// rounded once, then the vector divided by its double norm (W is linear and the weights sum to 1, so this
// is W·(Σ w_t K_t) normalized). One definition for the host backend and the device kernel, so the
// summaries — and every routing decision made from them — are the same bits on both.
KVSIM_HD inline void sekv_summary(const float* kbar, const float* W, int d, int d_proj, float* out) {
  double nn = 0;
  for (int j = 0; j < d_proj; ++j) {
    double a = 0;
    for (int c = 0; c < d; ++c) a += double(kbar[c]) * W[int64_t(c) * d_proj + j];
    out[j] = float(a);
    nn += a * a;
  }
  if (nn > 0)
    for (int j = 0; j < d_proj; ++j) out[j] = float(out[j] / sqrt(nn));
}

// SEKV routing score (seed 003, eq. 5) from the dot product q'·summary: sigmoid(dot/sqrt(d') + log|S|).
KVSIM_HD inline float sekv_route(float dot_q_summary, float inv_sqrt_d, int32_t span_len) {
  const float x = dot_q_summary * inv_sqrt_d + logf(float(span_len));
  return 1.f / (1.f + expf(-x));
}

}  // namespace kvsim::ref::hd
