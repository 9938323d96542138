#include "kernels/reference/select.hpp"

#include <algorithm>
#include <cstring>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>

#include "kernels/reference/gather.hpp"
#include "kernels/reference/hd.hpp"

namespace kvsim::ref {

int64_t topk_indices(const float* scores, int64_t n, int64_t k, int32_t* out) {
  k = std::clamp<int64_t>(k, 0, n);
  if (k == 0) return 0;
  std::vector<uint64_t> w(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) w[size_t(i)] = hd::rank_word(scores[i], int32_t(i));
  // A strict total order, so selecting the k-th then sorting the first k gives exactly partial_sort's
  // output, in O(n + k log k).
  if (k < n) std::nth_element(w.begin(), w.begin() + (k - 1), w.end());
  std::sort(w.begin(), w.begin() + k);
  for (int64_t i = 0; i < k; ++i) out[i] = int32_t(uint32_t(w[size_t(i)]));
  return k;
}

std::vector<int32_t> topk(std::span<const float> scores, int64_t k) {
  std::vector<int32_t> out(size_t(std::clamp<int64_t>(k, 0, int64_t(scores.size()))));
  topk_indices(scores.data(), int64_t(scores.size()), k, out.data());
  return out;
}

int64_t quantile_keep_count(double rho, int64_t n) { return hd::keep_count(rho, n); }

float quantile_threshold(std::span<const float> scores, double rho) {
  const int64_t k = quantile_keep_count(rho, int64_t(scores.size()));
  if (k == 0) return std::numeric_limits<float>::infinity();
  return scores[size_t(topk(scores, k).back())];
}

std::vector<int32_t> quantile_select(std::span<const float> scores, double rho) {
  auto kept = topk(scores, quantile_keep_count(rho, int64_t(scores.size())));
  std::sort(kept.begin(), kept.end());
  return kept;
}

namespace {
// One level of the cascade: the children whose parent is kept, then the quantile per `scope`.
std::vector<int32_t> select_level(std::span<const float> scores, std::span<const int32_t> parent,
                                  const std::vector<uint8_t>& parent_kept, double rho, QuantileScope scope) {
  const int64_t n = int64_t(scores.size());
  if (int64_t(parent.size()) != n) throw std::invalid_argument("chess_hierarchical_select: parent map size");
  std::vector<uint8_t> active(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const int32_t p = parent[size_t(i)];
    if (p < 0 || size_t(p) >= parent_kept.size()) throw std::invalid_argument("chess_hierarchical_select: parent id");
    active[size_t(i)] = parent_kept[size_t(p)];
  }
  std::vector<int32_t> kept;
  if (scope == QuantileScope::survivors) {
    std::vector<int32_t> ids;
    std::vector<float> s;
    for (int64_t i = 0; i < n; ++i)
      if (active[size_t(i)]) {
        ids.push_back(int32_t(i));
        s.push_back(scores[size_t(i)]);
      }
    for (int32_t j : quantile_select(s, rho)) kept.push_back(ids[size_t(j)]);  // ascending stays ascending
  } else {
    std::vector<float> masked(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) masked[size_t(i)] = active[size_t(i)] ? scores[size_t(i)] : 0.f;
    for (int32_t i : quantile_select(masked, rho))
      if (active[size_t(i)]) kept.push_back(i);
  }
  return kept;
}

std::vector<uint8_t> to_mask(const std::vector<int32_t>& ids, size_t n) {
  std::vector<uint8_t> m(n, 0);
  for (int32_t i : ids) m[size_t(i)] = 1;
  return m;
}
}  // namespace

HierarchicalSelection chess_hierarchical_select(std::span<const float> grid_scores,
                                                std::span<const float> chunk_scores,
                                                std::span<const float> page_scores,
                                                std::span<const int32_t> chunk_parent,
                                                std::span<const int32_t> page_parent, double rho_g,
                                                double rho_c, double rho_p, QuantileScope scope) {
  HierarchicalSelection sel;
  sel.grids = quantile_select(grid_scores, rho_g);
  sel.chunks = select_level(chunk_scores, chunk_parent, to_mask(sel.grids, grid_scores.size()), rho_c, scope);
  sel.pages = select_level(page_scores, page_parent, to_mask(sel.chunks, chunk_scores.size()), rho_p, scope);
  return sel;
}

HierarchicalSelection chess_hierarchical_select(std::span<const float> grid_scores,
                                                std::span<const float> chunk_scores,
                                                std::span<const float> page_scores, int pages_per_chunk,
                                                int chunks_per_grid, double rho_g, double rho_c, double rho_p,
                                                QuantileScope scope) {
  if (pages_per_chunk <= 0 || chunks_per_grid <= 0) throw std::invalid_argument("chess_hierarchical_select: N_c, N_g");
  const size_t P = page_scores.size();
  const size_t C = (P + pages_per_chunk - 1) / pages_per_chunk;
  const size_t G = (C + chunks_per_grid - 1) / chunks_per_grid;
  if (chunk_scores.size() != C || grid_scores.size() != G)
    throw std::invalid_argument("chess_hierarchical_select: level sizes do not match N_c, N_g");
  std::vector<int32_t> page_parent(P), chunk_parent(C);
  for (size_t p = 0; p < P; ++p) page_parent[p] = int32_t(p / pages_per_chunk);
  for (size_t c = 0; c < C; ++c) chunk_parent[c] = int32_t(c / chunks_per_grid);
  return chess_hierarchical_select(grid_scores, chunk_scores, page_scores, chunk_parent, page_parent, rho_g, rho_c,
                                   rho_p, scope);
}

std::vector<int32_t> chess_context_pages(std::span<const int32_t> selected, int64_t num_pages, int64_t sink_pages,
                                         int64_t window_pages) {
  std::vector<int32_t> ids(selected.begin(), selected.end());
  for (int64_t p = 0; p < std::min(sink_pages, num_pages); ++p) ids.push_back(int32_t(p));
  for (int64_t p = std::max<int64_t>(0, num_pages - window_pages); p < num_pages; ++p) ids.push_back(int32_t(p));
  return dedup(ids);
}

}  // namespace kvsim::ref
