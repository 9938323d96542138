// Quest on the device (kvsim::ref::quest_page_minmax, quest_page_bound, quest_select_pages): the
// per-page channel min/max of the keys, the page upper bounds Σ_c max(q_c·min_c, q_c·max_c), and the
// selection — the last page always, the best k - 1 of the others by topk.cu (exact rank words: the
// reference's tie rule) in ascending page order, then the last page, which is the largest id, so the
// list stays ascending as the reference's sort leaves it. Min/max: one thread per (page, channel),
// channel fastest (coalesced rows). Bound: one thread per page summing its d channel bounds in the
// host's order for every query head of the KV head's group (bit-identical bounds, so the selection is
// identical); n·d·4 bytes for the min/max, 2·P·d·4 for the bounds once per KV head; memory-bound.
#include <stdexcept>

#include "kernels/optimized/cuda.hpp"
#include "kernels/reference/cuda_common.cuh"
#include "kernels/reference/hd.hpp"

namespace kvsim::opt::KVSIM_CUDA_BACKEND {
namespace {
namespace check = ::kvsim::ref::KVSIM_CUDA_BACKEND::detail;
namespace hd = ::kvsim::ref::hd;
constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads) page_minmax_kernel(PageMinmaxParams p, int64_t pages) {
  const int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= pages * p.d) return;
  const int64_t pg = e / p.d;
  const int c = int(e % p.d);
  const int64_t b = pg * p.page_size, end = b + p.page_size < p.n ? b + p.page_size : p.n;
  float mn = p.keys[b * p.d + c], mx = mn;
  for (int64_t t = b + 1; t < end; ++t) {
    const float k = p.keys[t * p.d + c];
    mn = k < mn ? k : mn;  // std::min / std::max's choice on NaN: keep the first unless the new one compares
    mx = mx < k ? k : mx;
  }
  p.kmin[e] = mn;
  p.kmax[e] = mx;
}

// Every query head of the group at once, so each page's min and max keys are read once per KV head
// (not once per query head): kMaxHeads running sums per thread at a time, each in the reference's
// channel order; the page's score is their std::max from -inf, in head order.
constexpr int kMaxHeads = 16;
__global__ void __launch_bounds__(kThreads) page_bound_kernel(PageBoundParams p) {
  const int64_t pg = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (pg >= p.pages) return;
  float best = -INFINITY;
  for (int h0 = 0; h0 < p.heads; h0 += kMaxHeads) {  // groups above kMaxHeads (MQA) re-read per 16 heads
    const int n = p.heads - h0 < kMaxHeads ? p.heads - h0 : kMaxHeads;
    float s[kMaxHeads];
    for (int h = 0; h < kMaxHeads; ++h) s[h] = 0.f;
    for (int c = 0; c < p.d; ++c) {
      const float lo = p.kmin[pg * p.d + c], hi = p.kmax[pg * p.d + c];
      for (int h = 0; h < n; ++h) s[h] += hd::quest_channel_bound(p.q[(h0 + h) * p.d + c], lo, hi);
    }
    for (int h = 0; h < n; ++h) best = best < s[h] ? s[h] : best;
  }
  p.bound[pg] = best;
}

// Each row's last page after its others (row r's ids start at r * stride).
__global__ void last_page_kernel(int32_t* out, int64_t stride, int64_t at, int32_t page, int rows) {
  const int r = int(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r < rows) out[r * stride + at] = page;
}
}  // namespace

void quest_page_minmax(const PageMinmaxParams& p) {
  if (p.page_size <= 0) throw std::runtime_error("opt::quest_page_minmax: page_size <= 0");
  if (p.n <= 0 || p.d <= 0) return;
  const int64_t pages = (p.n + p.page_size - 1) / p.page_size;
  KVSIM_LAUNCH(page_minmax_kernel, check::blocks_for(pages * p.d, kThreads), kThreads)(p, pages);
  check::check(cudaGetLastError(), "opt::quest_page_minmax");
}

void quest_page_bound(const PageBoundParams& p) {
  if (p.heads < 1) throw std::runtime_error("opt::quest_page_bound: heads < 1");
  if (p.pages <= 0) return;
  KVSIM_LAUNCH(page_bound_kernel, check::blocks_for(p.pages, kThreads), kThreads)(p);
  check::check(cudaGetLastError(), "opt::quest_page_bound");
}

namespace {
// The index-order top-k of the pages before the last.
TopkParams others_topk(const PageSelectParams& p) {
  TopkParams t;
  t.scores = p.bound, t.out = p.out, t.rows = p.rows, t.n = p.pages - 1, t.rank_order = false, t.workspace = p.workspace;
  t.k = p.k - 1 < p.pages - 1 ? p.k - 1 : p.pages - 1;
  t.scores_stride = p.pages;  // each row's bound holds every page; the last is never a candidate
  t.out_stride = t.k + 1;     // room for the last page after each row's others
  return t;
}
}  // namespace

int64_t quest_select_workspace_words(const PageSelectParams& p) {
  return p.pages <= 0 || p.k <= 0 ? 0 : int64_t(p.rows) * topk_workspace_words(others_topk(p));
}

int64_t quest_select_pages(const PageSelectParams& p) {
  if (p.rows < 1) throw std::runtime_error("opt::quest_select_pages: rows " + std::to_string(p.rows) + " < 1");
  if (p.pages <= 0 || p.k <= 0) return 0;
  const TopkParams t = others_topk(p);
  const int64_t others = t.k;
  if (others > 0) topk(t);  // ascending page ids
  KVSIM_LAUNCH(last_page_kernel, check::blocks_for(p.rows, kThreads), kThreads)(p.out, others + 1, others,
                                                                              int32_t(p.pages - 1), p.rows);
  check::check(cudaGetLastError(), "opt::quest_select_pages (last page)");
  return others + 1;
}

}  // namespace kvsim::opt::KVSIM_CUDA_BACKEND
