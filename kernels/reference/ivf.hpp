// CTKVR (seed 004) query-centroid IVF, recall and rerank (host reference), for one KV head and its
// GQA group of G query heads. Per-head arrays are stacked group-major: Q[G, d], centroids[G, C, d].
#pragma once
#include <cstdint>
#include <span>
#include <vector>

namespace kvsim::ref {

// Algorithm 1 (a): centroids[G, C, d] are the last C queries of each query head; for centroid c,
// A_q = softmax over the n keys of scale·(q_{g,c}·k) per head g, A_kv = max over the group, and
// ivf[c, 0..ρ') = the top ρ' = min(rho, n) key ids of A_kv (rank order, ties by lower id).
// ivf is [C, ρ']; returns ρ'.
int qcivf_build(const float* centroids, int G, int C, const float* K, int64_t n, int d, float scale, int rho,
                int32_t* ivf);
// The same build with its two inner kernels given, so a faster implementation of the same arithmetic
// reuses the loop (kernels/host/ctkvr.cpp): the dot-product score GEMM S[m, n] = scale·Q·Kᵀ (each element
// as score_gemv rounds it) and the top-k in rank order (topk_indices' contract).
struct QcivfKernels {
  void (*score)(const float* Q, int64_t m, const float* K, int64_t n, int d, float scale, float* S);
  int64_t (*topk)(const float* scores, int64_t n, int64_t k, int32_t* out);
};
int qcivf_build(const float* centroids, int G, int C, const float* K, int64_t n, int d, float scale, int rho,
                int32_t* ivf, const QcivfKernels& kernels);

// Algorithm 2 (b) recall: Cos_q[g, c] = cos(q_g, centroid_{g,c}), Cos_kv = max over the group, the top
// C' centroids (rank order, written to *chosen when given), and the dedup (sorted, unique) union of
// their ivf rows ivf[C, rho].
std::vector<int32_t> ctkvr_recall(const float* q, int G, const float* centroids, int C, int d, const int32_t* ivf,
                                  int rho, int c_prime, std::vector<int32_t>* chosen = nullptr);
// The same with the dedup supplied (sorted, unique, in place; returns the count): kernels/host's bitmap
// dedup gives the identical list faster.
std::vector<int32_t> ctkvr_recall(const float* q, int G, const float* centroids, int C, int d, const int32_t* ivf,
                                  int rho, int c_prime, std::vector<int32_t>* chosen,
                                  int64_t (*dedup_inplace)(int32_t* ids, int64_t n));

// Algorithm 2 (c) rerank: over the recalled key ids, A'_q = softmax over the recalled set of
// scale·(q_g·k) per head, A'_kv = max over the group, the top rho' ids (rank order, ties by lower id).
std::vector<int32_t> ctkvr_rerank(const float* q, int G, const float* K, int64_t n, int d,
                                  std::span<const int32_t> recalled, float scale, int rho_prime);

// The CPU sparse attention over the chosen ids is gqa_gather_attention (attention.hpp); its state
// merges with the GPU part (sinks + local window) by merge_state (merge.hpp).

}  // namespace kvsim::ref
