// Decode attention of one query row against a set of key/value rows (host reference).
// Layout everywhere: float32, row-major, rows of `d` contiguous floats. Every call writes the
// normalized output out[d] = Σ_i softmax(s)_i · v_i with logits s_i = scale·(q·k_i) (+ bias_i), and
// returns the partial-softmax state as lse = log Σ_i exp(s_i) (natural log), so partial results over
// disjoint key sets merge exactly (merge.hpp). An empty key set gives out = 0 and lse = -inf.
// No call allocates.
#pragma once
#include <cstdint>
#include <span>

namespace kvsim::ref {

// Dense: keys K[n, d], values V[n, d].
float decode_attention(const float* q, const float* K, const float* V, int64_t n, int d, float scale,
                       float* out);

// GQA: `group` query heads Q[group, d] against one KV head; out[group, d], lse[group].
void gqa_decode_attention(const float* Q, int group, const float* K, const float* V, int64_t n, int d,
                          float scale, float* out, float* lse);

// Token-gather sparse attention: only rows idx[0..m) of K, V (each must lie in [0, n); repeats count
// twice, so dedup first where that matters). Throws std::out_of_range on a bad index.
float gather_attention(const float* q, const float* K, const float* V, int64_t n, int d, const int32_t* idx,
                       int64_t m, float scale, float* out);
void gqa_gather_attention(const float* Q, int group, const float* K, const float* V, int64_t n, int d,
                          const int32_t* idx, int64_t m, float scale, float* out, float* lse);

// Mixed-resolution attention (SEKV): an explicit list of entries assembled from several sources
// (anchors, local window, coarse span means, reconstructed tokens), each a key row, a value row and
// an additive logit bias: s_i = scale·(q·k_i) + bias_i. SEKV's coarse entry of a span S uses
// bias = log|S| (coarse_bias(|S|)), so one mean competes like the |S| tokens it stands for.
struct AttnEntry {
  const float* k;
  const float* v;
  float bias;
};
float biased_attention(const float* q, std::span<const AttnEntry> entries, int d, float scale, float* out);
float coarse_bias(int64_t span_len);  // log(span_len)

}  // namespace kvsim::ref
