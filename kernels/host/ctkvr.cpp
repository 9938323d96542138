#include "kernels/host/ctkvr.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "kernels/host/dots.hpp"
#include "kernels/host/group_softmax.hpp"
#include "kernels/host/select.hpp"

namespace kvsim::host {

int qcivf_build(const float* centroids, int G, int C, const float* K, int64_t n, int d, float scale, int rho,
                int32_t* ivf) {
  // The reference's result (softmax per head, max over the group, top rho per centroid), computed with
  // the exact score dots and the radix top-k. The G heads' centroids of a block are scored in one call,
  // so the keys stream once per block instead of once per (head, block): a block of cb centroids holds
  // G·cb query rows, and its score matrix stays within 16 MiB.
  const int rp = int(std::clamp<int64_t>(rho, 0, n));
  const int block = int(std::clamp<int64_t>((int64_t(1) << 22) / std::max<int64_t>(1, int64_t(G) * n), 1, 256));
  thread_local std::vector<float> Q, S, A;
  Q.resize(size_t(G) * size_t(std::min(block, C)) * size_t(d));
  S.resize(size_t(G) * size_t(std::min(block, C)) * size_t(n));
  A.resize(size_t(n));
  for (int c0 = 0; c0 < C; c0 += block) {
    const int cb = std::min(block, C - c0);
    // Row g·cb + c of the block: head g's centroid c0 + c.
    for (int g = 0; g < G; ++g)
      std::copy_n(centroids + (int64_t(g) * C + c0) * d, int64_t(cb) * d, Q.data() + int64_t(g) * cb * d);
    exact_dots(Q.data(), G * cb, d, K, nullptr, n, d, scale, S.data(), n);
    for (int c = 0; c < cb; ++c) {
      // Head g's row of centroid c is at S + (g·cb + c)·n: stride cb·n between the heads.
      group_softmax_max(S.data() + int64_t(c) * n, G, n, int64_t(cb) * n, A.data());
      topk_indices(A.data(), n, rp, ivf + int64_t(c0 + c) * rp);
    }
  }
  return rp;
}

std::vector<int32_t> ctkvr_rerank(const float* q, int G, const float* K, int64_t n, int d, const int32_t* recalled,
                                  int64_t m, float scale, int rho_prime) {
  for (int64_t i = 0; i < m; ++i)
    if (recalled[i] < 0 || recalled[i] >= n)
      throw std::out_of_range("gather_rows: index " + std::to_string(recalled[i]) + " outside [0, " +
                              std::to_string(n) + ")");
  thread_local std::vector<float> S, A;
  S.resize(size_t(G) * size_t(m));
  A.resize(size_t(m));
  // A contiguous id range (the Observation-2 pass over every offloaded key) streams the rows in place.
  const bool contiguous = m > 0 && recalled[m - 1] - recalled[0] == m - 1 &&
                          std::is_sorted(recalled, recalled + m) &&
                          std::adjacent_find(recalled, recalled + m) == recalled + m;
  if (contiguous) exact_dots(q, G, d, K + int64_t(recalled[0]) * d, nullptr, m, d, scale, S.data(), m);
  else exact_dots(q, G, d, K, recalled, m, d, scale, S.data(), m);
  group_softmax_max(S.data(), G, m, m, A.data());
  std::vector<int32_t> out(size_t(std::clamp<int64_t>(rho_prime, 0, m)));
  topk_indices(A.data(), m, rho_prime, out.data());
  for (int32_t& j : out) j = recalled[j];
  return out;
}

}  // namespace kvsim::host
