// Scoring GEMV/GEMM of queries against stored vectors — summaries, centroids, page vectors, keys
// (host reference). Vectors M[n, d] row-major. `cosine` divides by both norms (a zero vector scores 0),
// as CTKVR's query-to-centroid recall does; otherwise plain dot products (optionally scaled).
#pragma once
#include <cstdint>

namespace kvsim::ref {

enum class ScoreKind { dot, cosine };

// scores[n] = scale · q·M_iᵀ (dot) or cos(q, M_i) (cosine; scale ignored).
void score_gemv(const float* q, const float* M, int64_t n, int d, float* scores, ScoreKind kind = ScoreKind::dot,
                float scale = 1.f);

// S[m, n] = scores of each of m queries Q[m, d] against M[n, d].
void score_gemm(const float* Q, int64_t m, const float* M, int64_t n, int d, float* S,
                ScoreKind kind = ScoreKind::dot, float scale = 1.f);

// out[n] = max over the m rows of S[m, n] (CTKVR's max over the query heads of a GQA group).
void reduce_max_rows(const float* S, int64_t m, int64_t n, float* out);
// out[n] = Σ over the m rows of S[m, n] (kvpress/ChunkKV's sum over heads).
void reduce_sum_rows(const float* S, int64_t m, int64_t n, float* out);

// SEKV routing score (seed 003, eq. 5) of spans against one projected query q'[d']:
// alpha[s] = sigmoid(q'·summary_s / sqrt(d') + log|S_s|), summaries[m, d'], span_len[m] >= 1.
// (The paper's projection is trained; pca_projection in lowrank.hpp is the untrained stand-in.)
void sekv_routing_scores(const float* q_proj, const float* summaries, int64_t m, int d_proj, const int32_t* span_len,
                         float* alpha);

// In-place softmax of each row of S[m, n] (max-shifted).
void softmax_rows(float* S, int64_t m, int64_t n);

}  // namespace kvsim::ref
