// Top-k / quantile selection per row: an exact radix select on 64-bit rank words, a compaction in index
// order, and (for rank order) a bitonic sort of the k survivors. One block per row. Same result as
// kvsim::ref::topk (rank order) or quantile_select (ascending index): hd::rank_word makes every word
// distinct (score key high, index low), so "the k smallest words" is exactly the ranking's first k with
// its tie rule built in. Design and bound: kernels/optimized/README.md.
#include <cstdint>
#include <stdexcept>
#include <string>

#include "kernels/optimized/cuda.hpp"
#include "kernels/reference/cuda_common.cuh"
#include "kernels/reference/hd.hpp"

namespace kvsim::opt::KVSIM_CUDA_BACKEND {
namespace {
namespace check = ::kvsim::ref::KVSIM_CUDA_BACKEND::detail;
using Word = unsigned long long;

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kDigitBits = 8;  // 256 shared-memory bins per pass: 8 passes at most for a 64-bit word
constexpr int kBins = 1 << kDigitBits;
constexpr int64_t kSharedWords = 4096;  // a sort of up to 4096 words (32 KiB) stays in shared memory
constexpr unsigned kFullWarp = 0xffffffffu;

// The rank word of element i, or the largest word for an element the filter excludes: it then ranks
// after every candidate (a NaN candidate's word is below it: its index bit 31 is 0), so it is never
// among the k smallest when k does not exceed the candidates.
__device__ __forceinline__ Word word_at(const TopkParams& p, const float* s, int64_t i) {
  if (p.parent_kept && !p.parent_kept[i / p.group_size]) return ~Word(0);
  return ::kvsim::ref::hd::rank_word(s[i], int32_t(i));
}

__global__ void __launch_bounds__(kThreads) topk_kernel(TopkParams p, int64_t k, int64_t cap) {
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const float* s = p.scores + int64_t(blockIdx.x) * p.n;
  const int64_t n = p.n;

  // 1. Radix select, most significant digit first: narrow (prefix, mask) to the bucket holding the
  //    k-th smallest word; stop as soon as that whole bucket is taken. Then word w is kept iff
  //    (w & mask) <= prefix — exactly k words, since the words are distinct.
  __shared__ unsigned hist[kBins];
  __shared__ Word s_prefix, s_mask;
  __shared__ long long s_need;
  __shared__ int s_done;
  Word prefix = 0, mask = 0;
  if (k < n) {  // (k = n: every element is kept; with a filter k < n unless all compete)
    if (tid == 0) s_prefix = 0, s_mask = 0, s_need = k, s_done = 0;
    for (int shift = 64 - kDigitBits; shift >= 0; shift -= kDigitBits) {
      for (int d = tid; d < kBins; d += blockDim.x) hist[d] = 0;
      __syncthreads();
      prefix = s_prefix, mask = s_mask;
      for (int64_t i = tid; i < n; i += blockDim.x) {
        const Word w = word_at(p, s, i);
        if ((w & mask) == prefix) atomicAdd(&hist[(w >> shift) & (kBins - 1)], 1u);
      }
      __syncthreads();
      if (tid == 0) {  // 256 bins: a serial scan is shorter than a block scan's barriers
        long long below = 0;
        int d = 0;
        while (below + hist[d] < s_need) below += hist[d++];
        s_need -= below;
        s_prefix |= Word(d) << shift;
        s_mask |= Word(kBins - 1) << shift;
        s_done = (long long)hist[d] == s_need;
      }
      __syncthreads();
      prefix = s_prefix, mask = s_mask;
      if (s_done) break;  // the same shared value for every thread: a uniform exit
    }
  }

  // 2. Compaction in index order, one block-wide tile at a time: a ballot gives each kept word its place
  //    within the warp, the warps' counts (shared) its place within the tile.
  KVSIM_DYNAMIC_SHARED(Word, shared_words);
  Word* words = !p.rank_order ? nullptr : cap <= kSharedWords ? shared_words : p.workspace + int64_t(blockIdx.x) * cap;
  int32_t* out = p.out + int64_t(blockIdx.x) * k;
  __shared__ unsigned warp_kept[kWarps];
  int64_t base_pos = 0;
  for (int64_t base = 0; base < n; base += blockDim.x) {
    const int64_t i = base + tid;
    const Word w = i < n ? word_at(p, s, i) : ~Word(0);
    const bool keep = i < n && w != ~Word(0) && (w & mask) <= prefix;
    const unsigned ballot = __ballot_sync(kFullWarp, keep);
    if (lane == 0) warp_kept[warp] = __popc(ballot);
    __syncthreads();
    int64_t pos = base_pos + __popc(ballot & ((1u << lane) - 1u)), tile = 0;
    for (int v = 0; v < kWarps; ++v) {
      if (v < warp) pos += warp_kept[v];
      tile += warp_kept[v];
    }
    if (keep) {
      if (p.rank_order)
        words[pos] = w;
      else
        out[pos] = int32_t(i);
    }
    base_pos += tile;
    __syncthreads();  // warp_kept is rewritten by the next tile
  }
  if (!p.rank_order) return;

  // 3. Bitonic sort of the k kept words, padded to cap (a power of two) with the largest word.
  for (int64_t j = k + tid; j < cap; j += blockDim.x) words[j] = ~Word(0);
  __syncthreads();
  for (int64_t size = 2; size <= cap; size <<= 1)
    for (int64_t stride = size / 2; stride > 0; stride >>= 1) {
      for (int64_t i = tid; i < cap; i += blockDim.x) {
        const int64_t j = i ^ stride;
        if (j <= i) continue;
        const Word a = words[i], b = words[j];
        if ((a > b) == ((i & size) == 0)) words[i] = b, words[j] = a;
      }
      __syncthreads();
    }
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
  const size_t shared_bytes = p.rank_order && in_shared ? size_t(cap) * sizeof(Word) : 0;
  KVSIM_LAUNCH(topk_kernel, p.rows, kThreads, shared_bytes)(p, k, cap);
  check::check_launch("opt::topk");
  return k;
}

}  // namespace kvsim::opt::KVSIM_CUDA_BACKEND
