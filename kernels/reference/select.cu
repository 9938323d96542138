// Simple CUDA versions of quantile retention and CHESS hierarchical masking (see cuda.hpp), composed of
// the launchers in ops.cu the way select.cpp composes the host kernels: a quantile is a top-k
// (topk_rows, the one ranking: higher first, ties by lower index, NaN last) then an ascending sort; a
// level of the cascade masks its candidates by their parent's mark, then takes its quantile over the
// survivors (compacted) or over the whole level with pruned entries zeroed (masked_all).
#include <thrust/copy.h>
#include <thrust/execution_policy.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/sort.h>

#include <stdexcept>

#include "kernels/reference/cuda.hpp"
#include "kernels/reference/cuda_common.cuh"
#include "kernels/reference/hd.hpp"

namespace kvsim::ref::KVSIM_CUDA_BACKEND {
namespace {
constexpr int kThreads = 256;

// mask[ids[j]] = 1 for the kept ids (mask zeroed before).
__global__ void mark_kernel(const int32_t* ids, int64_t m, uint8_t* mask) {
  const int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j < m) mask[ids[j]] = 1;
}

// active[i] = whether the parent of candidate i was kept; masked[i] = its score, or 0 when pruned
// (S' = S ⊙ P_active of Algorithm 1).
__global__ void activate_kernel(const float* scores, const int32_t* parent, const uint8_t* parent_kept, int64_t n,
                                uint8_t* active, float* masked) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  active[i] = parent_kept[parent[i]];
  masked[i] = active[i] ? scores[i] : 0.f;
}

__global__ void regular_parent_kernel(int64_t n, int group, int32_t* parent) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) parent[i] = int32_t(i / group);
}

struct IsActive {
  const uint8_t* active;
  __host__ __device__ bool operator()(int32_t i) const { return active[i] != 0; }
};

DeviceBuffer<uint8_t> to_mask(const int32_t* ids, int64_t m, int64_t n) {
  DeviceBuffer<uint8_t> mask(static_cast<size_t>(n));
  if (n > 0) detail::check(cudaMemset(mask.get(), 0, size_t(n)), "chess_hierarchical_select memset");
  if (m > 0) {
    KVSIM_LAUNCH(mark_kernel, detail::blocks_for(m, kThreads), kThreads)(ids, m, mask.get());
    detail::check_launch("chess_hierarchical_select mark");
  }
  return mask;
}

// One level of the cascade (select.cpp's select_level): kept ids, ascending, into out; returns the count.
int64_t select_level(const float* scores, int64_t n, const int32_t* parent, const uint8_t* parent_kept, double rho,
                     bool masked_all, int32_t* out) {
  if (n <= 0) return 0;
  DeviceBuffer<uint8_t> active(static_cast<size_t>(n));
  DeviceBuffer<float> masked(static_cast<size_t>(n));
  KVSIM_LAUNCH(activate_kernel, detail::blocks_for(n, kThreads), kThreads)(scores, parent, parent_kept, n,
                                                                          active.get(), masked.get());
  detail::check_launch("chess_hierarchical_select activate");
  const thrust::counting_iterator<int32_t> first(0), last = first + n;
  if (masked_all) {
    // The quantile over the whole level of the zeroed scores, then ANDed with the parent mask.
    DeviceBuffer<int32_t> kept(static_cast<size_t>(n));
    const int64_t k = quantile_select(masked.get(), n, rho, kept.get());
    const int64_t m = thrust::copy_if(thrust::device, kept.get(), kept.get() + k, out, IsActive{active.get()}) - out;
    detail::check_launch("chess_hierarchical_select and");
    return m;
  }
  // Survivors: compact their ids (ascending) and scores, take the quantile there, map positions to ids.
  DeviceBuffer<int32_t> ids(static_cast<size_t>(n)), pos(static_cast<size_t>(n));
  const int64_t m = thrust::copy_if(thrust::device, first, last, ids.get(), IsActive{active.get()}) - ids.get();
  detail::check_launch("chess_hierarchical_select compact");
  DeviceBuffer<float> s(static_cast<size_t>(m > 0 ? m : 1));
  gather_rows(scores, 1, ids.get(), m, s.get());
  const int64_t k = quantile_select(s.get(), m, rho, pos.get());
  gather_rows(ids.get(), 1, pos.get(), k, out);  // ascending positions -> ascending ids
  return k;
}
}  // namespace

int64_t quantile_select(const float* scores, int64_t n, double rho, int32_t* kept) {
  const int64_t k = hd::keep_count(rho, n);
  if (k == 0) return 0;
  topk_rows(scores, 1, n, k, kept);
  thrust::sort(thrust::device, kept, kept + k);
  detail::check_launch("quantile_select");
  return k;
}

LevelCounts chess_hierarchical_select(const float* grid_scores, int64_t G, const float* chunk_scores, int64_t C,
                                      const float* page_scores, int64_t P, const int32_t* chunk_parent,
                                      const int32_t* page_parent, double rho_g, double rho_c, double rho_p,
                                      bool masked_all, int32_t* grids, int32_t* chunks, int32_t* pages) {
  LevelCounts c;
  c.grids = quantile_select(grid_scores, G, rho_g, grids);
  const DeviceBuffer<uint8_t> grid_kept = to_mask(grids, c.grids, G);
  c.chunks = select_level(chunk_scores, C, chunk_parent, grid_kept.get(), rho_c, masked_all, chunks);
  const DeviceBuffer<uint8_t> chunk_kept = to_mask(chunks, c.chunks, C);
  c.pages = select_level(page_scores, P, page_parent, chunk_kept.get(), rho_p, masked_all, pages);
  return c;
}

LevelCounts chess_hierarchical_select(const float* grid_scores, const float* chunk_scores, const float* page_scores,
                                      int64_t P, int pages_per_chunk, int chunks_per_grid, double rho_g, double rho_c,
                                      double rho_p, bool masked_all, int32_t* grids, int32_t* chunks, int32_t* pages) {
  if (pages_per_chunk <= 0 || chunks_per_grid <= 0) throw std::invalid_argument("chess_hierarchical_select: N_c, N_g");
  const int64_t C = (P + pages_per_chunk - 1) / pages_per_chunk, G = (C + chunks_per_grid - 1) / chunks_per_grid;
  DeviceBuffer<int32_t> page_parent(static_cast<size_t>(P)), chunk_parent(static_cast<size_t>(C));
  if (P > 0) {
    KVSIM_LAUNCH(regular_parent_kernel, detail::blocks_for(P, kThreads), kThreads)(P, pages_per_chunk,
                                                                                   page_parent.get());
    KVSIM_LAUNCH(regular_parent_kernel, detail::blocks_for(C, kThreads), kThreads)(C, chunks_per_grid,
                                                                                   chunk_parent.get());
    detail::check_launch("chess_hierarchical_select parents");
  }
  return chess_hierarchical_select(grid_scores, G, chunk_scores, C, page_scores, P, chunk_parent.get(),
                                   page_parent.get(), rho_g, rho_c, rho_p, masked_all, grids, chunks, pages);
}

}  // namespace kvsim::ref::KVSIM_CUDA_BACKEND
