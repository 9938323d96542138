// CHESS's hierarchical selection (grid -> chunk -> page, survivors scope, the regular hierarchy), fast
// and identical to ref::chess_hierarchical_select: the same kept ids per level, ascending.
#pragma once
#include <cstdint>

#include "kernels/reference/select.hpp"

namespace kvsim::host {

// Page p is in chunk p / pages_per_chunk, chunk c in grid c / chunks_per_grid; chunks =
// ceil(pages / pages_per_chunk) and grids = ceil(chunks / chunks_per_grid) scores are read. Throws
// std::invalid_argument when pages_per_chunk or chunks_per_grid is not positive, as the reference does.
ref::HierarchicalSelection chess_select(const float* grid_scores, const float* chunk_scores, const float* page_scores,
                                        int64_t pages, int pages_per_chunk, int chunks_per_grid, double rho_g,
                                        double rho_c, double rho_p);

}  // namespace kvsim::host
