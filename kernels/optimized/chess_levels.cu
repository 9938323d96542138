// CHESS's hierarchical quantile select (QuantileScope::survivors, kvsim::ref::chess_hierarchical_select
// over the regular hierarchy: page p in chunk p / pages_per_chunk, chunk c in grid c / chunks_per_grid)
// from level scores already on the device, in ONE launch of one 1024-thread block and one read-back of
// the three kept counts. chess_select.cu runs it after its score GEMV; the replay's CHESS selector runs
// it on the exact scores of exact_scores.cu, so its selection stays bit-identical to the host's.
//   The block runs the three levels in sequence with barriers between. Per level it counts the
//   survivors from the level above's kept marks (a bitmap in shared memory), computes
//   k = ceil(rho · survivors) on the device (hd::keep_count, the host's rule and arithmetic),
//   radix-selects the k best survivors in place (block_select.cuh: an excluded child gets the largest
//   word — no compaction, no sort, the reference's tie rule since survivors keep their ascending order)
//   and compacts them in index order, marking them in the next level's bitmap. No memset (the block
//   clears its bitmaps), no host read-back between levels, no per-call allocation.
// Design and bound: README.md here ("CHESS score GEMV + hierarchical select").
#include <stdexcept>
#include <string>

#include "kernels/optimized/block_select.cuh"
#include "kernels/optimized/cuda.hpp"
#include "kernels/reference/cuda_common.cuh"
#include "kernels/reference/hd.hpp"

namespace kvsim::opt::KVSIM_CUDA_BACKEND {
namespace {
namespace check = ::kvsim::ref::KVSIM_CUDA_BACKEND::detail;
namespace bs = block_select;
using bs::Word;

constexpr int kSelectThreads = 1024;  // one block on one SM: as many loads in flight as a block holds
// The kept marks of grids and chunks live in shared memory: up to 8192 words (32 KiB), 262144 marks.
constexpr int64_t kMaxMarkWords = 8192;
constexpr unsigned kFullWarp = 0xffffffffu;

__device__ __forceinline__ bool marked(const unsigned* bits, int64_t i) { return (bits[i >> 5] >> (i & 31)) & 1u; }

// One level of the select, by the whole block: the quantile rho of the children of the parents marked in
// parent_bits (parent of i = i / group; all n compete when parent_bits is null), kept ids ascending
// into out, and marked in kept_bits (when not null) for the level below. Returns the kept count.
__device__ int64_t select_level(bs::Shared& sh, int32_t* tile_ids, unsigned* s_count, const float* s, int64_t n,
                                int group, const unsigned* parent_bits, int64_t n_parents, double rho, int32_t* out,
                                unsigned* kept_bits) {
  const int tid = threadIdx.x;
  // Survivors: every child of a kept parent; only the last parent may have fewer than `group` children.
  int64_t survivors = n;
  if (parent_bits) {
    if (tid == 0) *s_count = 0;
    __syncthreads();
    unsigned local = 0;
    for (int64_t w = tid; w < (n_parents + 31) / 32; w += blockDim.x) local += __popc(parent_bits[w]);
    for (int o = 16; o > 0; o >>= 1) local += __shfl_xor_sync(kFullWarp, local, o);
    if ((tid & 31) == 0 && local) atomicAdd(s_count, local);
    __syncthreads();
    const int64_t kept_parents = *s_count;
    const bool last_kept = marked(parent_bits, n_parents - 1);
    survivors = kept_parents * group - (last_kept ? n_parents * group - n : 0);
    __syncthreads();  // s_count is reset by the next level
  }
  const int64_t k = ::kvsim::ref::hd::keep_count(rho, survivors);  // the same value in every thread
  if (k == 0) return 0;
  // Each score is loaded whether or not its parent was kept: the warp's load is then one aligned
  // segment of full sectors (the scores are L2-resident, just written by the scores kernel).
  const auto word_at = [&](int64_t i) {
    const float v = s[i];
    if (parent_bits && !marked(parent_bits, int32_t(i) / group)) return bs::kExcluded;
    return ::kvsim::ref::hd::rank_word(v, int32_t(i));
  };
  const int64_t i0 = bs::aligned_start(s, sizeof(float));
  Word prefix = 0, mask = 0;
  if (k < survivors) bs::radix_bounds(sh, i0, n, k, word_at, prefix, mask);
  bs::IdStager staged{tile_ids, out};
  const int64_t kept = bs::compact_in_order(
      sh, i0, n, word_at, prefix, mask,
      [&](int64_t, int64_t in_tile, int64_t i, Word) {
        staged.put(in_tile, int32_t(i));
        if (kept_bits) atomicOr(&kept_bits[i >> 5], 1u << (i & 31));
      },
      [&](int64_t, int64_t tile) { staged.tile_done(tile); });
  staged.finish();
  return kept;
}

// The three levels, one block. counts[0..2] = kept grids, chunks, pages.
// One block per launch: minBlocksPerSM 1 lets ptxas use up to 64 registers instead of spilling.
__global__ void __launch_bounds__(kSelectThreads, 1) chess_levels_kernel(ChessLevelsParams p, int64_t G, int64_t C) {
  __shared__ bs::Shared sh;
  __shared__ int32_t tile_ids[2 * kSelectThreads];  // kept ids staged for whole-block stores (IdStager)
  __shared__ unsigned s_count;
  KVSIM_DYNAMIC_SHARED(unsigned, marks);  // [grid words | chunk words]
  const int64_t grid_words = (G + 31) / 32, chunk_words = (C + 31) / 32;
  unsigned* grid_bits = marks;
  unsigned* chunk_bits = marks + grid_words;
  // Cleared before any mark is set or read: the grid level's compaction (which sets the grid marks)
  // and the chunk level's survivor count (which reads them) both start behind a barrier.
  for (int64_t w = threadIdx.x; w < grid_words + chunk_words; w += blockDim.x) marks[w] = 0u;
  const int64_t g = select_level(sh, tile_ids, &s_count, p.grid_scores, G, 1, nullptr, 0, p.rho_g, p.grids, grid_bits);
  const int64_t c = select_level(sh, tile_ids, &s_count, p.chunk_scores, C, p.chunks_per_grid, grid_bits, G, p.rho_c,
                                 p.chunks, chunk_bits);
  const int64_t pg = select_level(sh, tile_ids, &s_count, p.page_scores, p.pages, p.pages_per_chunk, chunk_bits, C,
                                  p.rho_p, p.kept_pages, nullptr);
  if (threadIdx.x < 3) p.level_counts[threadIdx.x] = int32_t(threadIdx.x == 0 ? g : threadIdx.x == 1 ? c : pg);
}
}  // namespace

::kvsim::ref::KVSIM_CUDA_BACKEND::LevelCounts chess_levels(const ChessLevelsParams& p) {
  if (p.pages < 0 || p.pages_per_chunk <= 0 || p.chunks_per_grid <= 0)
    throw std::runtime_error("opt::chess_levels: pages < 0 or a level size <= 0");
  if (p.pages > INT32_MAX) throw std::runtime_error("opt::chess_levels: pages above 2^31 - 1");
  if (p.pages == 0) return {};
  if (!p.level_counts) throw std::runtime_error("opt::chess_levels: level_counts scratch required");
  const int64_t C = (p.pages + p.pages_per_chunk - 1) / p.pages_per_chunk;
  const int64_t G = (C + p.chunks_per_grid - 1) / p.chunks_per_grid;
  const int64_t mark_words = (G + 31) / 32 + (C + 31) / 32;
  if (mark_words > kMaxMarkWords)
    throw std::runtime_error("opt::chess_levels: above 262144 grids and chunks (their marks fill shared memory)");
  KVSIM_LAUNCH(chess_levels_kernel, 1, kSelectThreads, size_t(mark_words) * sizeof(unsigned))(p, G, C);
  check::check(cudaGetLastError(), "opt::chess_levels");
  int32_t counts[3] = {0, 0, 0};  // the one host synchronization: the caller needs the counts
  check::check(cudaMemcpy(counts, p.level_counts, sizeof counts, cudaMemcpyDeviceToHost), "opt::chess_levels (counts)");
  return {counts[0], counts[1], counts[2]};
}

}  // namespace kvsim::opt::KVSIM_CUDA_BACKEND
