// Selection (host reference): top-k, quantile thresholds, CHESS hierarchical masking.
// One ranking everywhere: higher score first, ties broken by the lower index, NaN last
// (hd::ranks_before). So every selection is deterministic and keeps exactly the count it says.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

namespace kvsim::ref {

// Indices of the k best scores in rank order (best first). k >= n returns all n; k <= 0 none.
std::vector<int32_t> topk(std::span<const float> scores, int64_t k);
// Same, into out[min(k, n)]; returns the count written.
int64_t topk_indices(const float* scores, int64_t n, int64_t k, int32_t* out);

// How many of n candidates a retention ratio rho in [0, 1] keeps: ceil(rho·n), where rho·n within
// 1e-9 (relative) of an integer counts as that integer (0.3·10 keeps 3, not 4). rho is clamped to [0, 1].
int64_t quantile_keep_count(double rho, int64_t n);
// The threshold tau = the keep_count-th best score (Quantile(S, 1 - rho) of CHESS Algorithm 1, taken
// as an order statistic, no interpolation); +inf when nothing is kept.
float quantile_threshold(std::span<const float> scores, double rho);
// The kept indices, ascending: exactly quantile_keep_count(rho, n) of them, ties at tau resolved by
// the lower index (a plain `score >= tau` could keep more on ties).
std::vector<int32_t> quantile_select(std::span<const float> scores, double rho);

// CHESS hierarchical masking (seed 000, §3.2, Algorithm 1 "Batched Hierarchical Similarity Pruning").
// Levels grid -> chunk -> page, with parent maps chunk_parent[c] = grid of chunk c and
// page_parent[p] = chunk of page p.
//
// Which quantile: the paper's text says "chunks are evaluated if and only if their parent grid resides
// in G_selected. From this subset, the top rho_c fraction is preserved", and likewise pages inside kept
// chunks. So the default, QuantileScope::survivors, takes ONE quantile per level, GLOBALLY over the
// surviving candidates of that level (all children of all kept parents together — not per parent):
//   grids kept  = top ceil(rho_g · G) of all grids,
//   chunks kept = top ceil(rho_c · |chunks whose grid was kept|) among those chunks,
//   pages kept  = top ceil(rho_p · |pages whose chunk was kept|)  among those pages.
// QuantileScope::masked_all is Algorithm 1 read literally (lines 11-13, 16-18): the scores of children
// of pruned parents are zeroed (S' = S ⊙ P_active), the quantile is taken over ALL entries of the level
// (the top ceil(rho · n_level) of S' are marked) and the mark is ANDed with the parent mask, so a level
// keeps at most ceil(rho · n_level) (fewer when zeroed entries outrank surviving ones). For comparison.
// In both, a chunk whose grid was pruned and a page whose chunk was pruned are never kept.
enum class QuantileScope { survivors, masked_all };

struct HierarchicalSelection {
  std::vector<int32_t> grids, chunks, pages;  // kept ids per level, ascending
};

HierarchicalSelection chess_hierarchical_select(std::span<const float> grid_scores,
                                                std::span<const float> chunk_scores,
                                                std::span<const float> page_scores,
                                                std::span<const int32_t> chunk_parent,
                                                std::span<const int32_t> page_parent, double rho_g,
                                                double rho_c, double rho_p,
                                                QuantileScope scope = QuantileScope::survivors);

// The regular CHESS hierarchy: page p is in chunk p / pages_per_chunk (N_c), chunk c in grid
// c / chunks_per_grid (N_g); the last chunk and grid may be partial. Sizes of the score spans must be
// num_pages, ceil(num_pages / N_c), ceil(num_chunks / N_g).
HierarchicalSelection chess_hierarchical_select(std::span<const float> grid_scores,
                                                std::span<const float> chunk_scores,
                                                std::span<const float> page_scores, int pages_per_chunk,
                                                int chunks_per_grid, double rho_g, double rho_c, double rho_p,
                                                QuantileScope scope = QuantileScope::survivors);

// CHESS's final decoding context: selected pages ∪ the first sink_pages ∪ the last window_pages of
// num_pages, ascending and unique (the `indices` list of the sparse paged attention).
std::vector<int32_t> chess_context_pages(std::span<const int32_t> selected, int64_t num_pages, int64_t sink_pages,
                                         int64_t window_pages);

}  // namespace kvsim::ref
