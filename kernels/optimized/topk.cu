// Top-k / quantile selection per row: an exact radix select on 64-bit rank words, a compaction in index
// order, and (for rank order) a bitonic sort of the k survivors. One block per row. Same result as
// kvsim::ref::topk (rank order) or quantile_select (ascending index): hd::rank_word makes every word
// distinct (score key high, index low), so "the k smallest words" is exactly the ranking's first k with
// its tie rule built in. Design and bound: kernels/optimized/README.md.
#include <cstdint>
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

constexpr int kThreads = 256;
constexpr int64_t kSharedWords = 4096;  // a sort of up to 4096 words (32 KiB) stays in shared memory

// The rank word of element i, or kExcluded for an element the filter excludes: it then ranks after
// every candidate (a NaN candidate's word is below it: its index bit 31 is 0), so it is never among the
// k smallest when k does not exceed the candidates. The score is loaded before the filter is looked at,
// so a warp's load covers its whole aligned segment (full sectors) whatever the filter keeps.
__device__ __forceinline__ Word word_at(const TopkParams& p, const float* s, int64_t i) {
  const float v = s[i];
  if (p.parent_kept && !p.parent_kept[i / p.group_size]) return bs::kExcluded;
  return ::kvsim::ref::hd::rank_word(v, int32_t(i));
}

__global__ void __launch_bounds__(kThreads) topk_kernel(TopkParams p, int64_t k, int64_t cap) {
  __shared__ bs::Shared sh;
  __shared__ int32_t tile_ids[2 * kThreads];  // index order: kept ids staged for whole-block stores
  const int tid = threadIdx.x;
  const float* s = p.scores + int64_t(blockIdx.x) * p.n;
  const int64_t n = p.n, i0 = bs::aligned_start(s, sizeof(float));
  const auto at = [&](int64_t i) { return word_at(p, s, i); };

  // 1. Radix select (k = n: every element is kept; with a filter k < n unless all compete).
  Word prefix = 0, mask = 0;
  if (k < n) bs::radix_bounds(sh, i0, n, k, at, prefix, mask);

  // 2. Compaction in index order: the ids to out (index order) through a staging buffer, stored a whole
  //    block at a time; or the words to the sort buffer (rank order).
  KVSIM_DYNAMIC_SHARED(Word, shared_words);
  Word* words = !p.rank_order ? nullptr : cap <= kSharedWords ? shared_words : p.workspace + int64_t(blockIdx.x) * cap;
  int32_t* out = p.out + int64_t(blockIdx.x) * k;
  if (p.rank_order)
    bs::compact_in_order(sh, i0, n, at, prefix, mask,
                         [&](int64_t base, int64_t in_tile, int64_t, Word w) { words[base + in_tile] = w; },
                         [](int64_t, int64_t) {});
  else {
    bs::IdStager ids{tile_ids, out};
    bs::compact_in_order(
        sh, i0, n, at, prefix, mask, [&](int64_t, int64_t in_tile, int64_t i, Word) { ids.put(in_tile, i); },
        [&](int64_t, int64_t tile) { ids.tile_done(tile); });
    ids.finish();
  }
  if (!p.rank_order) return;

  // 3. Bitonic sort of the k kept words, padded to cap (a power of two) with the largest word.
  for (int64_t j = k + tid; j < cap; j += blockDim.x) words[j] = bs::kExcluded;
  __syncthreads();
  bs::bitonic_sort(words, cap, shared_words, kSharedWords);
  for (int64_t j = tid; j < k; j += blockDim.x) out[j] = int32_t(unsigned(words[j]));
}

int64_t pow2_at_least(int64_t x) {
  int64_t c = 1;
  while (c < x) c <<= 1;
  return c;
}
}  // namespace

int64_t topk_workspace_words(int64_t k, int64_t n) {
  const int64_t kk = k < 0 ? 0 : (k > n ? n : k);
  const int64_t cap = pow2_at_least(kk);
  return kk > 0 && cap > kSharedWords ? cap : 0;
}

int64_t topk(const TopkParams& p) {
  if (p.n < 0 || p.rows < 0 || p.n > INT32_MAX) throw std::runtime_error("opt::topk: n outside [0, 2^31)");
  if (p.parent_kept && p.group_size <= 0) throw std::runtime_error("opt::topk: group_size <= 0");
  const int64_t k = p.k < 0 ? 0 : (p.k > p.n ? p.n : p.k);
  if (k == 0 || p.rows == 0) return k;
  const int64_t cap = pow2_at_least(k);
  const bool in_shared = cap <= kSharedWords;
  if (p.rank_order && !in_shared && !p.workspace) throw std::runtime_error("opt::topk: workspace required for k > 4096");
  // Rank order sorts in shared memory: all k words up to 4096, else 4096-word tiles of the workspace.
  const size_t shared_bytes = p.rank_order ? size_t(in_shared ? cap : kSharedWords) * sizeof(Word) : 0;
  KVSIM_LAUNCH(topk_kernel, p.rows, kThreads, shared_bytes)(p, k, cap);
  check::check(cudaGetLastError(), "opt::topk");  // no synchronization: the count is known here
  return k;
}

}  // namespace kvsim::opt::KVSIM_CUDA_BACKEND
