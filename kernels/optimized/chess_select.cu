// CHESS's per-step selection on the GPU: the anchor's scores over all summary vectors (grids, chunks and
// pages concatenated, as policies/chess/selector.cpp lays them out) in ONE launch, then the hierarchical
// quantile select (grid -> chunk -> page) of kvsim::ref::chess_hierarchical_select.
//   Scores: one warp per summary vector, each lane a float4 slice of d, the dot product reduced with xor
//   shuffles — every vector is read once as coalesced 16-byte loads, no shared memory, no barrier; the
//   anchor (d floats) stays in L1/L2 for every warp. The three levels in one launch keep the small grid
//   and chunk levels from each paying a launch and a tail of idle SMs.
//   Select (QuantileScope::survivors, the policy's): per level, topk.cu in index order with the parent
//   filter — the survivors compete in place, no compaction, no sort — after one small kernel marks the
//   kept parents. The survivors' count (for ceil(rho · survivors)) comes from the kept parents' ids,
//   which the host reads back (a few hundred bytes) as the reference launcher does with its counts.
//   masked_all (Algorithm 1 read literally, a test-only scope) uses the reference launcher.
// Design and bound: README.md here.
#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/optimized/cuda.hpp"
#include "kernels/reference/cuda_common.cuh"
#include "kernels/reference/hd.hpp"

namespace kvsim::opt::KVSIM_CUDA_BACKEND {
namespace {
namespace check = ::kvsim::ref::KVSIM_CUDA_BACKEND::detail;

constexpr int kThreads = 256;
constexpr unsigned kFullWarp = 0xffffffffu;

__global__ void __launch_bounds__(kThreads) summary_scores_kernel(const float* anchor, const float* M, int64_t n, int d,
                                                                  float scale, float* scores) {
  const int lane = threadIdx.x & 31;
  const int64_t row = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  if (row >= n) return;  // whole warps: blockDim is a multiple of 32
  const float4* a = reinterpret_cast<const float4*>(anchor);
  const float4* x = reinterpret_cast<const float4*>(M + row * d);
  float s = 0.f;
  for (int i = lane; i < d / 4; i += 32) {
    const float4 u = a[i], v = x[i];
    s += u.x * v.x + u.y * v.y + u.z * v.z + u.w * v.w;
  }
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(kFullWarp, s, o);
  if (lane == 0) scores[row] = scale * s;
}

// mask[ids[j]] = 1 for the kept ids of a level (mask cleared before).
__global__ void __launch_bounds__(kThreads) mark_kept_kernel(const int32_t* ids, int64_t m, unsigned char* mask) {
  const int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j < m) mask[ids[j]] = 1;
}

// One level: the quantile of the children of the kept parents (parent of i = i / group), kept ids
// ascending into out; kept_parents = the level above's kept ids (device), m of them. Returns the count.
int64_t select_level(const float* scores, int64_t n, int64_t group, int64_t n_parents, const int32_t* kept_parents,
                     int64_t m, double rho, unsigned char* mask, int32_t* out) {
  if (n == 0 || m == 0) return 0;
  std::vector<int32_t> parents(static_cast<size_t>(m));
  check::check(cudaMemcpy(parents.data(), kept_parents, size_t(m) * sizeof(int32_t), cudaMemcpyDeviceToHost),
               "opt::chess_select (kept ids)");
  int64_t survivors = 0;
  for (int32_t g : parents) survivors += std::min<int64_t>(group, n - int64_t(g) * group);
  check::check(cudaMemsetAsync(mask, 0, size_t(n_parents)), "opt::chess_select (mask)");
  KVSIM_LAUNCH(mark_kept_kernel, check::blocks_for(m, kThreads), kThreads)(kept_parents, m, mask);
  check::check_launch("opt::chess_select (mark)");
  TopkParams t;
  t.scores = scores, t.out = out, t.rows = 1, t.n = n, t.k = ::kvsim::ref::hd::keep_count(rho, survivors);
  t.rank_order = false, t.parent_kept = mask, t.group_size = group;
  return topk(t);
}
}  // namespace

::kvsim::ref::KVSIM_CUDA_BACKEND::LevelCounts chess_select(const ChessSelectParams& p) {
  if (p.num_pages < 0 || p.pages_per_chunk <= 0 || p.chunks_per_grid <= 0)
    throw std::runtime_error("opt::chess_select: num_pages < 0 or a level size <= 0");
  if (p.d <= 0 || p.d % 4 != 0) throw std::runtime_error("opt::chess_select: d must be a positive multiple of 4");
  if (p.num_pages == 0) return {};
  const int64_t C = (p.num_pages + p.pages_per_chunk - 1) / p.pages_per_chunk;
  const int64_t G = (C + p.chunks_per_grid - 1) / p.chunks_per_grid;
  const int64_t n = G + C + p.num_pages;
  KVSIM_LAUNCH(summary_scores_kernel, check::blocks_for(n * 32, kThreads), kThreads)
  (p.anchor, p.summaries, n, p.d, p.scale, p.scores);
  check::check_launch("opt::chess_select (scores)");
  if (p.masked_all)
    return ::kvsim::ref::KVSIM_CUDA_BACKEND::chess_hierarchical_select(
        p.scores, p.scores + G, p.scores + G + C, p.num_pages, p.pages_per_chunk, p.chunks_per_grid, p.rho_g, p.rho_c,
        p.rho_p, true, p.grids, p.chunks, p.pages);
  if (!p.level_mask) throw std::runtime_error("opt::chess_select: level_mask scratch required");
  ::kvsim::ref::KVSIM_CUDA_BACKEND::LevelCounts c;
  TopkParams t;  // grids: a plain quantile, every grid competes
  t.scores = p.scores, t.out = p.grids, t.rows = 1, t.n = G, t.k = ::kvsim::ref::hd::keep_count(p.rho_g, G);
  t.rank_order = false;
  c.grids = topk(t);
  c.chunks = select_level(p.scores + G, C, p.chunks_per_grid, G, p.grids, c.grids, p.rho_c, p.level_mask, p.chunks);
  c.pages = select_level(p.scores + G + C, p.num_pages, p.pages_per_chunk, C, p.chunks, c.chunks, p.rho_p,
                         p.level_mask, p.pages);
  return c;
}

}  // namespace kvsim::opt::KVSIM_CUDA_BACKEND
