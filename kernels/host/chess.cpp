#include "kernels/host/chess.hpp"

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "kernels/host/select.hpp"
#include "kernels/reference/hd.hpp"

namespace kvsim::host {

namespace {
// One level: the children of the kept parents (ascending; child i's parent is i / per, so each kept
// parent's children are one run), the top keep_count(rho, survivors) of them, ascending. The reference
// lists the survivors in ascending id order and ranks them by position in that list; the runs are
// copied in the same order, so positions and ranks agree, and host::topk_indices returns the
// reference's set (one strict total order). Only the kept parents' children are read, where the
// reference walks every child through a parent map, and the kept set comes out in id order by a scan
// of a mark per survivor instead of a sort.
std::vector<int32_t> level(const float* scores, int64_t n, int64_t per, const std::vector<int32_t>& parents,
                           double rho) {
  thread_local std::vector<float> s;
  thread_local std::vector<int32_t> top;
  thread_local std::vector<uint8_t> mark;
  // The runs are short (N_c = 8 pages: 32 bytes) and scattered: copied inline rather than by a call
  // each, and prefetched a few parents ahead (DRAM-resident scores would otherwise stall every run).
  constexpr size_t kAhead = 64;
  s.resize(parents.size() * size_t(per));
  float* dst = s.data();
  int64_t m = 0;
  for (size_t q = 0; q < parents.size(); ++q) {
    if (q + kAhead < parents.size()) {
      const int64_t a = int64_t(parents[q + kAhead]) * per;
      __builtin_prefetch(scores + a);
      __builtin_prefetch(scores + std::min(n, a + per) - 1);
    }
    const int64_t b = int64_t(parents[q]) * per, e = std::min(n, b + per);
    for (int64_t i = b; i < e; ++i) dst[m++] = scores[i];
  }
  const int64_t k = ref::hd::keep_count(rho, m);
  top.resize(size_t(k));
  topk_indices(s.data(), m, k, top.data());
  mark.assign(size_t(m), 0);
  for (const int32_t j : top) mark[size_t(j)] = 1;
  // Branch-free: every survivor's id is stored and the count advances by its mark (a branch per
  // survivor mispredicts at a keep ratio of 1/4 and took most of the time); one slot of slack for the
  // stores past the last kept id.
  std::vector<int32_t> kept(size_t(k) + 1);
  int32_t* o = kept.data();
  const uint8_t* mk = mark.data();
  int64_t j = 0, cnt = 0;
  for (const int32_t p : parents) {
    const int64_t b = int64_t(p) * per, e = std::min(n, b + per);
    for (int64_t i = b; i < e; ++i, ++j) {
      o[cnt] = int32_t(i);
      cnt += mk[j];
    }
  }
  kept.resize(size_t(cnt));
  return kept;
}
}  // namespace

ref::HierarchicalSelection chess_select(const float* grid_scores, const float* chunk_scores, const float* page_scores,
                                        int64_t pages, int pages_per_chunk, int chunks_per_grid, double rho_g,
                                        double rho_c, double rho_p) {
  if (pages_per_chunk <= 0 || chunks_per_grid <= 0) throw std::invalid_argument("chess_select: N_c, N_g");
  const int64_t chunks = (pages + pages_per_chunk - 1) / pages_per_chunk;
  const int64_t grids = (chunks + chunks_per_grid - 1) / chunks_per_grid;
  ref::HierarchicalSelection sel;
  // The grids have no parent: one run of all of them.
  const std::vector<int32_t> all = grids > 0 ? std::vector<int32_t>{0} : std::vector<int32_t>{};
  sel.grids = level(grid_scores, grids, std::max<int64_t>(grids, 1), all, rho_g);
  sel.chunks = level(chunk_scores, chunks, chunks_per_grid, sel.grids, rho_c);
  sel.pages = level(page_scores, pages, pages_per_chunk, sel.chunks, rho_p);
  return sel;
}

}  // namespace kvsim::host
