// CHESS's per-step selection on the GPU: the anchor's scores over all summary vectors (grids, chunks and
// pages concatenated, as policies/chess/selector.cpp lays them out) in ONE launch, then the hierarchical
// quantile select (grid -> chunk -> page) of kvsim::ref::chess_hierarchical_select.
//   Scores: one warp per summary vector, each lane a float4 slice of d, the dot product reduced with xor
//   shuffles — every vector is read once as coalesced 16-byte loads, no shared memory, no barrier; the
//   anchor (d floats) stays in L1/L2 for every warp. The three levels in one launch keep the small grid
//   and chunk levels from each paying a launch and a tail of idle SMs.
//   Select: the reference CUDA launcher (kernels/reference/select.cu), reused: its cost is a few
//   top-k passes over G + C + P scores, small next to reading (G + C + P)·d floats, and reusing it keeps
//   the level rules (survivors, ties, masked_all) in one place. Design and bound: README.md here.
#include <stdexcept>
#include <string>

#include "kernels/optimized/cuda.hpp"
#include "kernels/reference/cuda_common.cuh"

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
  return ::kvsim::ref::KVSIM_CUDA_BACKEND::chess_hierarchical_select(
      p.scores, p.scores + G, p.scores + G + C, p.num_pages, p.pages_per_chunk, p.chunks_per_grid, p.rho_g, p.rho_c,
      p.rho_p, p.masked_all, p.grids, p.chunks, p.pages);
}

}  // namespace kvsim::opt::KVSIM_CUDA_BACKEND
