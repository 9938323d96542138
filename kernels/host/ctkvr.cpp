#include "kernels/host/ctkvr.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "kernels/host/dots.hpp"
#include "kernels/host/select.hpp"
#include "kernels/reference/score.hpp"

namespace kvsim::host {

int qcivf_build(const float* centroids, int G, int C, const float* K, int64_t n, int d, float scale, int rho,
                int32_t* ivf) {
  const int rp = int(std::clamp<int64_t>(rho, 0, n));
  const int block = int(std::clamp<int64_t>((int64_t(1) << 22) / std::max<int64_t>(1, int64_t(G) * n), 1, 256));
  std::vector<float> S(size_t(G) * block * n), row(size_t(G) * n), A(static_cast<size_t>(n));
  for (int c0 = 0; c0 < C; c0 += block) {
    const int cb = std::min(block, C - c0);
    for (int g = 0; g < G; ++g)
      exact_dots(centroids + (int64_t(g) * C + c0) * d, cb, d, K, nullptr, n, d, scale,
                 S.data() + int64_t(g) * block * n, n);
    for (int c = 0; c < cb; ++c) {
      for (int g = 0; g < G; ++g)
        std::copy_n(S.data() + (int64_t(g) * block + c) * n, n, row.data() + int64_t(g) * n);
      ref::softmax_rows(row.data(), G, n);
      ref::reduce_max_rows(row.data(), G, n, A.data());
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
  ref::softmax_rows(S.data(), G, m);
  ref::reduce_max_rows(S.data(), G, m, A.data());
  std::vector<int32_t> out(size_t(std::clamp<int64_t>(rho_prime, 0, m)));
  topk_indices(A.data(), m, rho_prime, out.data());
  for (int32_t& j : out) j = recalled[j];
  return out;
}

}  // namespace kvsim::host
