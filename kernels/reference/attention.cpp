#include "kernels/reference/attention.hpp"

#include <cmath>
#include <stdexcept>
#include <string>

#include "kernels/reference/hd.hpp"

namespace kvsim::ref {

namespace {
// The one attention loop every variant uses: entry i has key key(i), value val(i), bias bias(i).
template <class KeyF, class ValF, class BiasF>
float attend(const float* q, int64_t m, int d, float scale, float* out, KeyF key, ValF val, BiasF bias) {
  for (int c = 0; c < d; ++c) out[c] = 0.f;
  hd::OnlineSoftmax st;
  for (int64_t i = 0; i < m; ++i) {
    const float s = scale * hd::dot(q, key(i), d) + bias(i);
    float rescale, p;
    st.push(s, rescale, p);
    const float* v = val(i);
    for (int c = 0; c < d; ++c) out[c] = out[c] * rescale + p * v[c];
  }
  const float inv = st.inv_l();
  for (int c = 0; c < d; ++c) out[c] *= inv;
  return st.lse();
}

void check_idx(const int32_t* idx, int64_t m, int64_t n) {
  for (int64_t i = 0; i < m; ++i)
    if (idx[i] < 0 || idx[i] >= n)
      throw std::out_of_range("gather_attention: index " + std::to_string(idx[i]) + " outside [0, " +
                              std::to_string(n) + ")");
}
}  // namespace

float decode_attention(const float* q, const float* K, const float* V, int64_t n, int d, float scale,
                       float* out) {
  return attend(
      q, n, d, scale, out, [&](int64_t i) { return K + i * d; }, [&](int64_t i) { return V + i * d; },
      [](int64_t) { return 0.f; });
}

void gqa_decode_attention(const float* Q, int group, const float* K, const float* V, int64_t n, int d,
                          float scale, float* out, float* lse) {
  for (int g = 0; g < group; ++g) lse[g] = decode_attention(Q + int64_t(g) * d, K, V, n, d, scale, out + int64_t(g) * d);
}

float gather_attention(const float* q, const float* K, const float* V, int64_t n, int d, const int32_t* idx,
                       int64_t m, float scale, float* out) {
  check_idx(idx, m, n);
  return attend(
      q, m, d, scale, out, [&](int64_t i) { return K + int64_t(idx[i]) * d; },
      [&](int64_t i) { return V + int64_t(idx[i]) * d; }, [](int64_t) { return 0.f; });
}

void gqa_gather_attention(const float* Q, int group, const float* K, const float* V, int64_t n, int d,
                          const int32_t* idx, int64_t m, float scale, float* out, float* lse) {
  for (int g = 0; g < group; ++g)
    lse[g] = gather_attention(Q + int64_t(g) * d, K, V, n, d, idx, m, scale, out + int64_t(g) * d);
}

float biased_attention(const float* q, std::span<const AttnEntry> entries, int d, float scale, float* out) {
  return attend(
      q, int64_t(entries.size()), d, scale, out, [&](int64_t i) { return entries[i].k; },
      [&](int64_t i) { return entries[i].v; }, [&](int64_t i) { return entries[i].bias; });
}

float coarse_bias(int64_t span_len) { return std::log(float(span_len)); }

}  // namespace kvsim::ref
