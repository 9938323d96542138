#include "kernels/host/ctkvr.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "kernels/host/dots.hpp"
#include "kernels/host/select.hpp"
#include "kernels/reference/ivf.hpp"
#include "kernels/reference/score.hpp"

namespace kvsim::host {

int qcivf_build(const float* centroids, int G, int C, const float* K, int64_t n, int d, float scale, int rho,
                int32_t* ivf) {
  // The reference's loop (softmax per head, max over the group, top rho per centroid) with the exact
  // score dots and the radix top-k in place of its inner kernels.
  const ref::QcivfKernels fast{[](const float* Q, int64_t m, const float* M, int64_t nn, int dd, float sc, float* S) {
                                 exact_dots(Q, int(m), dd, M, nullptr, nn, dd, sc, S, nn);
                               },
                               &topk_indices};
  return ref::qcivf_build(centroids, G, C, K, n, d, scale, rho, ivf, fast);
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
