#include "kernels/reference/quest.hpp"

#include <algorithm>

#include "kernels/reference/hd.hpp"
#include "kernels/reference/select.hpp"

namespace kvsim::ref {

void quest_page_minmax(const float* K, int64_t n, int d, int page_size, float* kmin, float* kmax) {
  const int64_t P = (n + page_size - 1) / page_size;
  for (int64_t p = 0; p < P; ++p) {
    float* mn = kmin + p * d;
    float* mx = kmax + p * d;
    std::copy_n(K + p * page_size * d, d, mn);
    std::copy_n(K + p * page_size * d, d, mx);
    for (int64_t t = p * page_size + 1; t < std::min(n, (p + 1) * page_size); ++t)
      for (int c = 0; c < d; ++c) {
        mn[c] = std::min(mn[c], K[t * d + c]);
        mx[c] = std::max(mx[c], K[t * d + c]);
      }
  }
}

void quest_page_bound(const float* q, const float* kmin, const float* kmax, int64_t num_pages, int d, float* bound) {
  for (int64_t p = 0; p < num_pages; ++p) {
    float s = 0.f;
    for (int c = 0; c < d; ++c) s += hd::quest_channel_bound(q[c], kmin[p * d + c], kmax[p * d + c]);
    bound[p] = s;
  }
}

std::vector<int32_t> quest_select_pages(const float* bound, int64_t num_pages, int64_t k) {
  if (num_pages <= 0 || k <= 0) return {};
  // The last page first, then the best k - 1 of the others.
  std::vector<int32_t> kept = {int32_t(num_pages - 1)};
  const int64_t others = std::min(k - 1, num_pages - 1);
  kept.resize(size_t(1 + others));
  topk_indices(bound, num_pages - 1, others, kept.data() + 1);
  std::sort(kept.begin(), kept.end());
  return kept;
}

}  // namespace kvsim::ref
