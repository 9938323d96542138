// CHESS's hierarchical quantile select (QuantileScope::survivors, kvsim::ref::chess_hierarchical_select
// over the regular hierarchy) from level scores already on the device — the replay's CHESS selector
// scores the levels with the exact dot (exact_scores.cu) so its selection stays bit-identical to the
// host's, and hands the scores here. The levels as chess_select.cu runs them: grids by topk.cu in index
// order; each lower level by topk.cu with the parent filter after one small kernel marks the kept
// parents (the survivors are ranked in place, no compaction, no sort); the survivors' count, which sets
// ceil(ρ·survivors), from the kept parents' ids read back (at most G + C ints). Bound: three single-row
// top-k launches and two marks — launch latency at CHESS's sizes.
#include <algorithm>
#include <stdexcept>
#include <vector>

#include "kernels/optimized/cuda.hpp"
#include "kernels/reference/cuda_common.cuh"
#include "kernels/reference/hd.hpp"

namespace kvsim::opt::KVSIM_CUDA_BACKEND {
namespace {
namespace check = ::kvsim::ref::KVSIM_CUDA_BACKEND::detail;
constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads) mark_parents_kernel(const int32_t* ids, int64_t m, unsigned char* mask) {
  const int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j < m) mask[ids[j]] = 1;
}

// The children (parent of i = i / group) of the m kept parents: the quantile of the survivors, ascending.
int64_t level(const float* scores, int64_t n, int64_t group, int64_t n_parents, const int32_t* kept_parents, int64_t m,
              double rho, unsigned char* mask, int32_t* out) {
  if (n == 0 || m == 0) return 0;
  std::vector<int32_t> parents(static_cast<size_t>(m));
  check::check(cudaMemcpy(parents.data(), kept_parents, size_t(m) * sizeof(int32_t), cudaMemcpyDeviceToHost),
               "opt::chess_levels (kept ids)");
  int64_t survivors = 0;
  for (int32_t g : parents) survivors += std::min<int64_t>(group, n - int64_t(g) * group);
  check::check(cudaMemsetAsync(mask, 0, size_t(n_parents)), "opt::chess_levels (mask)");
  KVSIM_LAUNCH(mark_parents_kernel, check::blocks_for(m, kThreads), kThreads)(kept_parents, m, mask);
  check::check_launch("opt::chess_levels (mark)");
  TopkParams t;
  t.scores = scores, t.out = out, t.rows = 1, t.n = n, t.k = ::kvsim::ref::hd::keep_count(rho, survivors);
  t.rank_order = false, t.parent_kept = mask, t.group_size = group;
  return topk(t);
}
}  // namespace

::kvsim::ref::KVSIM_CUDA_BACKEND::LevelCounts chess_levels(const ChessLevelsParams& p) {
  if (p.pages < 0 || p.pages_per_chunk <= 0 || p.chunks_per_grid <= 0)
    throw std::runtime_error("opt::chess_levels: pages < 0 or a level size <= 0");
  ::kvsim::ref::KVSIM_CUDA_BACKEND::LevelCounts c;
  if (p.pages == 0) return c;
  if (!p.level_mask) throw std::runtime_error("opt::chess_levels: level_mask scratch required");
  const int64_t C = (p.pages + p.pages_per_chunk - 1) / p.pages_per_chunk;
  const int64_t G = (C + p.chunks_per_grid - 1) / p.chunks_per_grid;
  TopkParams t;  // grids: a plain quantile, every grid competes
  t.scores = p.grid_scores, t.out = p.grids, t.rows = 1, t.n = G, t.k = ::kvsim::ref::hd::keep_count(p.rho_g, G);
  t.rank_order = false;
  c.grids = topk(t);
  c.chunks = level(p.chunk_scores, C, p.chunks_per_grid, G, p.grids, c.grids, p.rho_c, p.level_mask, p.chunks);
  c.pages = level(p.page_scores, p.pages, p.pages_per_chunk, C, p.chunks, c.chunks, p.rho_p, p.level_mask,
                  p.kept_pages);
  return c;
}

}  // namespace kvsim::opt::KVSIM_CUDA_BACKEND
