// CHESS's per-step selection on the GPU in two launches and one host synchronization: the anchor's
// scores over all summary vectors (grids, chunks and pages concatenated, as policies/chess/selector.cpp
// lays them out), then the whole hierarchical quantile select (grid -> chunk -> page) of
// kvsim::ref::chess_hierarchical_select in one block (chess_levels.cu); the only read-back is the
// three kept counts the caller needs.
//   Scores: one warp per summary vector, each lane a float4 slice of d, the dot product reduced with xor
//   shuffles — every vector is read once as coalesced 16-byte loads; a block's 8 scores are stored
//   together (one 32-byte sector) instead of one lane-0 store per warp.
//   masked_all (Algorithm 1 read literally, a test-only scope) uses the reference launcher.
// Design and bound: README.md here.
#include <algorithm>
#include <stdexcept>
#include <string>

#include "kernels/optimized/cuda.hpp"
#include "kernels/reference/cuda_common.cuh"
#include "kernels/reference/hd.hpp"

namespace kvsim::opt::KVSIM_CUDA_BACKEND {
namespace {
namespace check = ::kvsim::ref::KVSIM_CUDA_BACKEND::detail;

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr unsigned kFullWarp = 0xffffffffu;

__global__ void __launch_bounds__(kThreads) summary_scores_kernel(const float* anchor, const float* M, int64_t n, int d,
                                                                  float scale, float* scores) {
  __shared__ float block_scores[kWarps];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t row0 = int64_t(blockIdx.x) * kWarps, row = row0 + warp;
  if (row < n) {  // the same for every lane of a warp, so the shuffles see the whole warp
    const float4* a = reinterpret_cast<const float4*>(anchor);
    const float4* x = reinterpret_cast<const float4*>(M + row * d);
    float s = 0.f;
    for (int i = lane; i < d / 4; i += 32) {
      const float4 u = __ldg(a + i), v = __ldg(x + i);  // one 16-byte load each (paged_decode.cu's load4)
      s += u.x * v.x + u.y * v.y + u.z * v.z + u.w * v.w;
    }
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(kFullWarp, s, o);
    if (lane == 0) block_scores[warp] = scale * s;
  }
  __syncthreads();
  if (threadIdx.x < kWarps && row0 + threadIdx.x < n) scores[row0 + threadIdx.x] = block_scores[threadIdx.x];
}

}  // namespace

::kvsim::ref::KVSIM_CUDA_BACKEND::LevelCounts chess_select(const ChessSelectParams& p) {
  if (p.num_pages < 0 || p.pages_per_chunk <= 0 || p.chunks_per_grid <= 0)
    throw std::runtime_error("opt::chess_select: num_pages < 0 or a level size <= 0");
  if (p.d <= 0 || p.d % 4 != 0) throw std::runtime_error("opt::chess_select: d must be a positive multiple of 4");
  if (p.num_pages > INT32_MAX) throw std::runtime_error("opt::chess_select: num_pages above 2^31 - 1");
  if (p.num_pages == 0) return {};
  if (!p.masked_all && !p.level_counts) throw std::runtime_error("opt::chess_select: level_counts scratch required");
  const int64_t C = (p.num_pages + p.pages_per_chunk - 1) / p.pages_per_chunk;
  const int64_t G = (C + p.chunks_per_grid - 1) / p.chunks_per_grid;
  const int64_t n = G + C + p.num_pages;
  KVSIM_LAUNCH(summary_scores_kernel, check::blocks_for(n, kWarps), kThreads)(p.anchor, p.summaries, n, p.d, p.scale,
                                                                              p.scores);
  check::check(cudaGetLastError(), "opt::chess_select (scores)");
  if (p.masked_all)
    return ::kvsim::ref::KVSIM_CUDA_BACKEND::chess_hierarchical_select(
        p.scores, p.scores + G, p.scores + G + C, p.num_pages, p.pages_per_chunk, p.chunks_per_grid, p.rho_g, p.rho_c,
        p.rho_p, true, p.grids, p.chunks, p.pages);
  // Stream-ordered after the scores: the three levels in one block (chess_levels.cu), whose one
  // read-back of the counts is the only host synchronization.
  ChessLevelsParams l;
  l.grid_scores = p.scores, l.chunk_scores = p.scores + G, l.page_scores = p.scores + G + C;
  l.pages = p.num_pages, l.pages_per_chunk = p.pages_per_chunk, l.chunks_per_grid = p.chunks_per_grid;
  l.rho_g = p.rho_g, l.rho_c = p.rho_c, l.rho_p = p.rho_p;
  l.grids = p.grids, l.chunks = p.chunks, l.kept_pages = p.pages, l.level_counts = p.level_counts;
  return chess_levels(l);
}

}  // namespace kvsim::opt::KVSIM_CUDA_BACKEND
