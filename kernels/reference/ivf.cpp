#include "kernels/reference/ivf.hpp"

#include <algorithm>
#include <stdexcept>

#include "kernels/reference/gather.hpp"
#include "kernels/reference/score.hpp"
#include "kernels/reference/select.hpp"

namespace kvsim::ref {

int qcivf_build(const float* centroids, int G, int C, const float* K, int64_t n, int d, float scale, int rho,
                int32_t* ivf) {
  const QcivfKernels plain{[](const float* Q, int64_t m, const float* M, int64_t nn, int dd, float sc, float* S) {
                             score_gemm(Q, m, M, nn, dd, S, ScoreKind::dot, sc);
                           },
                           &topk_indices};
  return qcivf_build(centroids, G, C, K, n, d, scale, rho, ivf, plain);
}

int qcivf_build(const float* centroids, int G, int C, const float* K, int64_t n, int d, float scale, int rho,
                int32_t* ivf, const QcivfKernels& kernels) {
  const int rp = int(std::clamp<int64_t>(rho, 0, n));
  // Centroids in blocks: one score GEMM per (group member, block), then per centroid the softmax over
  // keys, the max over the group and the top rho.
  const int block = int(std::clamp<int64_t>((int64_t(1) << 22) / std::max<int64_t>(1, int64_t(G) * n), 1, 256));
  std::vector<float> S(size_t(G) * block * n), row(size_t(G) * n), A(static_cast<size_t>(n));
  for (int c0 = 0; c0 < C; c0 += block) {
    const int cb = std::min(block, C - c0);
    for (int g = 0; g < G; ++g)
      kernels.score(centroids + (int64_t(g) * C + c0) * d, cb, K, n, d, scale, S.data() + int64_t(g) * block * n);
    for (int c = 0; c < cb; ++c) {
      for (int g = 0; g < G; ++g)
        std::copy_n(S.data() + (int64_t(g) * block + c) * n, n, row.data() + int64_t(g) * n);
      softmax_rows(row.data(), G, n);
      reduce_max_rows(row.data(), G, n, A.data());
      kernels.topk(A.data(), n, rp, ivf + int64_t(c0 + c) * rp);
    }
  }
  return rp;
}

std::vector<int32_t> ctkvr_recall(const float* q, int G, const float* centroids, int C, int d, const int32_t* ivf,
                                  int rho, int c_prime, std::vector<int32_t>* chosen) {
  return ctkvr_recall(q, G, centroids, C, d, ivf, rho, c_prime, chosen, &ref::dedup_inplace);
}

std::vector<int32_t> ctkvr_recall(const float* q, int G, const float* centroids, int C, int d, const int32_t* ivf,
                                  int rho, int c_prime, std::vector<int32_t>* chosen,
                                  int64_t (*dedup_ids)(int32_t* ids, int64_t n)) {
  std::vector<float> S(size_t(G) * C), cos_kv(static_cast<size_t>(C));
  for (int g = 0; g < G; ++g)
    score_gemv(q + int64_t(g) * d, centroids + int64_t(g) * C * d, C, d, S.data() + int64_t(g) * C, ScoreKind::cosine);
  reduce_max_rows(S.data(), G, C, cos_kv.data());
  const auto top = topk(cos_kv, c_prime);
  std::vector<int32_t> ids;
  ids.reserve(top.size() * size_t(rho));
  for (int32_t c : top) ids.insert(ids.end(), ivf + int64_t(c) * rho, ivf + int64_t(c + 1) * rho);
  if (chosen) *chosen = top;
  ids.resize(size_t(dedup_ids(ids.data(), int64_t(ids.size()))));
  return ids;
}

std::vector<int32_t> ctkvr_rerank(const float* q, int G, const float* K, int64_t n, int d,
                                  std::span<const int32_t> recalled, float scale, int rho_prime) {
  const int64_t m = int64_t(recalled.size());
  std::vector<float> rows(static_cast<size_t>(m * d));
  gather_rows(K, n, d, recalled.data(), m, rows.data());
  std::vector<float> S(size_t(G * m)), A(static_cast<size_t>(m));
  score_gemm(q, G, rows.data(), m, d, S.data(), ScoreKind::dot, scale);
  softmax_rows(S.data(), G, m);
  reduce_max_rows(S.data(), G, m, A.data());
  std::vector<int32_t> out;
  for (int32_t j : topk(A, rho_prime)) out.push_back(recalled[size_t(j)]);
  return out;
}

}  // namespace kvsim::ref
