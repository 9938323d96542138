// Top-k / quantile selection per row: an exact radix select on 64-bit rank words, a compaction in index
// order, and (for rank order) a sort of the k survivors. A row of at most one slice (block_elems, 4096 by
// default) runs in one block (block_select.cuh); a longer row is split over a block per slice
// (grid_select.cuh), all rows of the call in each launch. Same result as
// kvsim::ref::topk (rank order) or quantile_select (ascending index): hd::rank_word makes every word
// distinct (score key high, index low), so "the k smallest words" is exactly the ranking's first k with
// its tie rule built in. Design and bound: kernels/optimized/README.md.
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>

#include "kernels/optimized/block_select.cuh"
#include "kernels/optimized/grid_select.cuh"
#include "kernels/optimized/cuda.hpp"
#include "kernels/reference/cuda_common.cuh"
#include "kernels/reference/hd.hpp"

namespace kvsim::opt::KVSIM_CUDA_BACKEND {
namespace {
namespace check = ::kvsim::ref::KVSIM_CUDA_BACKEND::detail;
namespace bs = block_select;
namespace gs = grid_select;
using bs::Word;

constexpr int kThreads = 256;
constexpr int64_t kSharedWords = 4096;  // a sort of up to 4096 words (32 KiB) stays in shared memory
// A split row's slice: sized so all rows of the call fill about kTargetBlocks blocks (4 per SM of an
// H100 / H200, as paged_decode.cu plans), between kMinSlice (4 scores per thread: fewer would make the
// per-block histogram flush and ticket outweigh the reads) and kSlice (16 per thread; a row of at most
// kSlice stays in one block).
constexpr int64_t kSlice = 4096;
constexpr int64_t kMinSlice = 1024;
constexpr int64_t kTargetBlocks = 4 * 132;
constexpr int kSortThreads = 1024;  // the tile sort: 2 compare-exchanges per thread and step of 4096 words
constexpr int64_t kMergeTile = int64_t(gs::kThreads) * gs::kMergeItems;  // outputs per merge block
static_assert(gs::kTile == kSharedWords && kSlice <= kSharedWords, "one slice sorts in shared memory, as a merge tile does");

// The rank word of element i, or kExcluded for an element the filter excludes: it then ranks after
// every candidate (a NaN candidate's word is below it: its index bit 31 is 0), so it is never among the
// k smallest when k does not exceed the candidates. The score is loaded before the filter is looked at,
// so a warp's load covers its whole aligned segment (full sectors) whatever the filter keeps.
__device__ __forceinline__ Word word_at(const TopkParams& p, const float* s, int64_t i) {
  const float v = s[i];
  if (p.parent_kept && !p.parent_kept[i / p.group_size]) return bs::kExcluded;
  return ::kvsim::ref::hd::rank_word(v, int32_t(i));
}

// Row `row`'s scores and output: scores_stride and out_stride apart (0: n and k, rows back to back).
__device__ __forceinline__ const float* scores_row(const TopkParams& p, int64_t row) {
  return p.scores + row * (p.scores_stride > 0 ? p.scores_stride : p.n);
}
__device__ __forceinline__ int32_t* out_row(const TopkParams& p, int64_t row, int64_t k) {
  return p.out + row * (p.out_stride > 0 ? p.out_stride : k);
}

__global__ void __launch_bounds__(kThreads) topk_kernel(TopkParams p, int64_t k, int64_t cap) {
  __shared__ bs::Shared sh;
  __shared__ int32_t tile_ids[2 * kThreads];  // index order: kept ids staged for whole-block stores
  const int tid = threadIdx.x;
  const float* s = scores_row(p, blockIdx.x);
  const int64_t n = p.n, i0 = bs::aligned_start(s, sizeof(float));
  const auto at = [&](int64_t i) { return word_at(p, s, i); };

  // 1. Radix select (k = n: every element is kept; with a filter k < n unless all compete).
  Word prefix = 0, mask = 0;
  if (k < n) bs::radix_bounds(sh, i0, n, k, at, prefix, mask);

  // 2. Compaction in index order: the ids to out (index order) through a staging buffer, stored a whole
  //    block at a time; or the words to the sort buffer in shared memory (rank order; k <= n <= 4096).
  KVSIM_DYNAMIC_SHARED(Word, words);
  int32_t* out = out_row(p, blockIdx.x, k);
  if (p.rank_order)
    bs::compact_in_order(sh, i0, n, at, prefix, mask,
                         [&](int64_t base, int64_t in_tile, int64_t, Word w) { words[base + in_tile] = w; },
                         [](int64_t, int64_t) {});
  else {
    bs::IdStager ids{tile_ids, out};
    bs::compact_in_order(
        sh, i0, n, at, prefix, mask, [&](int64_t, int64_t in_tile, int64_t i, Word) { ids.put(in_tile, int32_t(i)); },
        [&](int64_t, int64_t tile) { ids.tile_done(tile); });
    ids.finish();
  }
  if (!p.rank_order) return;

  // 3. Bitonic sort of the k kept words, padded to cap (a power of two) with the largest word.
  for (int64_t j = k + tid; j < cap; j += blockDim.x) words[j] = bs::kExcluded;
  __syncthreads();
  bs::bitonic_sort(words, cap);
  for (int64_t j = tid; j < k; j += blockDim.x) out[j] = int32_t(unsigned(words[j]));
}

// ---- Rows longer than one slice: grid_select.cuh's passes, then an ordered compaction over the grid ----

// Where the grid path keeps its state, in the caller's workspace: the rows' RowStates (zeroed by the
// launcher), then per row the kept count of each slice, then (rank order) two buffers of k words.
struct SliceCount {
  unsigned strict, ties;  // words of the slice below the row's bucket, and in it
};
struct GridArgs {
  int64_t k = 0, slice = 0, splits = 0;
  gs::RowState* states = nullptr;  // [rows]
  SliceCount* counts = nullptr;    // [rows, splits]
  Word* buf_a = nullptr;           // [rows, k]: the survivors in index order, then merge ping-pong
  Word* buf_b = nullptr;           // [rows, k]
};

struct Slice {
  int64_t row, lo, hi;
  const float* s;  // the row's scores
};
__device__ __forceinline__ Slice slice_of(const TopkParams& p, const GridArgs& g) {
  const int64_t lo = int64_t(blockIdx.x) * g.slice, hi = lo + g.slice < p.n ? lo + g.slice : p.n;
  return {int64_t(blockIdx.y), lo, hi, scores_row(p, blockIdx.y)};
}

// One radix pass over every slice of every row (grid_select.cuh).
__global__ void __launch_bounds__(gs::kThreads) select_pass_kernel(TopkParams p, GridArgs g, int pass) {
  __shared__ unsigned scratch[gs::kBins + gs::kThreads / 32];
  __shared__ Word hdr[4];
  __shared__ int last;
  const Slice sl = slice_of(p, g);
  gs::RowState& st = g.states[sl.row];
  for (int d = threadIdx.x; d < gs::kBins; d += blockDim.x) scratch[d] = 0;
  Word prefix = 0, mask = 0;
  long long need = g.k;
  if (pass > 0) {
    const gs::Header h = gs::load_header(st, hdr);  // (its barrier also orders the zeroing)
    if (h.done) return;  // the row's bucket is taken (the same value for the whole block)
    prefix = h.prefix, mask = h.mask, need = h.need;
  } else {
    __syncthreads();
  }
  const int shift = gs::pass_shift(pass);
  const Word digit = (Word(1) << gs::pass_width(pass)) - 1;
  gs::for_slice(sl.lo + bs::aligned_start(sl.s + sl.lo, sizeof(float)), sl.lo, sl.hi, [&](int64_t i, bool valid) {
    const Word w = word_at(p, sl.s, i);
    if (valid && (w & mask) == prefix) atomicAdd(&scratch[(w >> shift) & digit], 1u);
  });
  __syncthreads();
  // The flush: every 32-byte sector of bins (8 lanes) with a non-zero bin is added whole, zeros
  // included, so each sector the atomics touch is used in full (a later pass's few matches scatter over
  // the 2048 bins: one 4-byte atomic per sector would use an eighth of it).
  for (int d = threadIdx.x; d < gs::kBins; d += blockDim.x) {
    const unsigned nonzero = __ballot_sync(bs::kFullWarp, scratch[d] != 0);
    if ((nonzero >> (threadIdx.x & 24u)) & 0xffu) atomicAdd(&st.hist[d], scratch[d]);
  }
  __threadfence();  // this block's bins are visible before its ticket
  // [handoff barrier] every thread's bins and fence come before thread 0's ticket. The emulator runs
  // blocks one after another, so it cannot show this order missing (tests/test_emu_checker.cpp).
  __syncthreads();
  if (threadIdx.x == 0) last = atomicAdd(&st.ticket, 1u) == unsigned(g.splits - 1);
  __syncthreads();
  if (last) gs::close_pass(st, scratch, pass, need);
}

// What every block of a row compacts with: the bucket (prefix, mask) and how many of its words to take.
// With no pass (k = n, no filter) the bucket is every word and all n are taken.
struct Kept {
  Word prefix = 0, mask = 0;
  long long need = 0;
};
// Every thread of the block calls it (a barrier when selected).
__device__ __forceinline__ Kept kept_bounds(const GridArgs& g, int64_t row, bool selected, Word* hdr) {
  if (!selected) return {0, 0, g.k};
  const gs::Header h = gs::load_header(g.states[row], hdr);
  return {h.prefix, h.mask, h.need};
}

// Each slice's counts of words below the bucket and in it, for the compaction's offsets.
__global__ void __launch_bounds__(gs::kThreads) count_kept_kernel(TopkParams p, GridArgs g, bool selected) {
  __shared__ unsigned warp_count[2][gs::kThreads / 32];
  __shared__ Word hdr[4];
  const Slice sl = slice_of(p, g);
  const Kept kb = kept_bounds(g, sl.row, selected, hdr);
  unsigned strict = 0, ties = 0;  // the warp's (every lane holds them)
  gs::for_slice(sl.lo + bs::aligned_start(sl.s + sl.lo, sizeof(float)), sl.lo, sl.hi, [&](int64_t i, bool valid) {
    const Word w = word_at(p, sl.s, i);
    valid = valid && w != bs::kExcluded;
    strict += __popc(__ballot_sync(bs::kFullWarp, valid && (w & kb.mask) < kb.prefix));
    ties += __popc(__ballot_sync(bs::kFullWarp, valid && (w & kb.mask) == kb.prefix));
  });
  if ((threadIdx.x & 31) == 0) warp_count[0][threadIdx.x >> 5] = strict, warp_count[1][threadIdx.x >> 5] = ties;
  __syncthreads();
  if (threadIdx.x == 0) {
    SliceCount c{0, 0};
    for (int w = 0; w < int(blockDim.x >> 5); ++w) c.strict += warp_count[0][w], c.ties += warp_count[1][w];
    g.counts[sl.row * g.splits + blockIdx.x] = c;
  }
}

// The slice's kept elements in index order from its offset (the kept counts of the slices before it):
// ids to out (index order), or words to buf_a (rank order, sorted next).
__global__ void __launch_bounds__(gs::kThreads) write_kept_kernel(TopkParams p, GridArgs g, bool selected) {
  __shared__ union {
    int32_t ids[2 * gs::kThreads];
    Word words[2 * gs::kThreads];
  } staged;  // the kept ids or words, stored a whole block at a time (block_select::Stager)
  __shared__ unsigned long long warp_sum[2][gs::kThreads / 32];
  __shared__ unsigned warp_keep[gs::kThreads / 32], warp_tie[gs::kThreads / 32];
  __shared__ Word hdr[4];
  const Slice sl = slice_of(p, g);
  const Kept kb = kept_bounds(g, sl.row, selected, hdr);
  unsigned long long strict = 0, ties = 0;  // of the slices before this one
  for (int64_t j = threadIdx.x; j < int64_t(blockIdx.x); j += blockDim.x) {
    const SliceCount c = g.counts[sl.row * g.splits + j];  // one 8-byte load
    strict += c.strict, ties += c.ties;
  }
  for (int off = 16; off > 0; off >>= 1) {
    strict += __shfl_xor_sync(bs::kFullWarp, strict, off);
    ties += __shfl_xor_sync(bs::kFullWarp, ties, off);
  }
  if ((threadIdx.x & 31) == 0) warp_sum[0][threadIdx.x >> 5] = strict, warp_sum[1][threadIdx.x >> 5] = ties;
  __syncthreads();
  long long strict_before = 0, ties_before = 0;
  for (int w = 0; w < int(blockDim.x >> 5); ++w) strict_before += warp_sum[0][w], ties_before += warp_sum[1][w];
  const int64_t offset = strict_before + (ties_before < kb.need ? ties_before : kb.need);
  const auto at = [&](int64_t i) { return word_at(p, sl.s, sl.lo + i); };
  const int64_t i0 = bs::aligned_start(sl.s + sl.lo, sizeof(float)), n = sl.hi - sl.lo;
  if (p.rank_order) {
    bs::Stager<Word> words{staged.words, g.buf_a + sl.row * g.k + offset};
    gs::compact_with_ties(
        warp_keep, warp_tie, i0, n, at, kb.prefix, kb.mask, ties_before, kb.need,
        [&](int64_t, int64_t in_tile, int64_t, Word w) { words.put(in_tile, w); },
        [&](int64_t, int64_t tile) { words.tile_done(tile); });
    words.finish();
  } else {
    bs::IdStager ids{staged.ids, out_row(p, sl.row, g.k) + offset};
    gs::compact_with_ties(
        warp_keep, warp_tie, i0, n, at, kb.prefix, kb.mask, ties_before, kb.need,
        [&](int64_t, int64_t in_tile, int64_t i, Word) { ids.put(in_tile, int32_t(sl.lo + i)); },
        [&](int64_t, int64_t tile) { ids.tile_done(tile); });
    ids.finish();
  }
}

// Rank order, step 1: each kTile of a row's survivors sorted in shared memory (bitonic, padded to a power
// of two with the largest word); to out when one tile holds them all, else to buf_b for the merges.
__global__ void __launch_bounds__(kSortThreads) sort_tiles_kernel(TopkParams p, GridArgs g) {
  KVSIM_DYNAMIC_SHARED(Word, tile);
  const int64_t row = blockIdx.y, t0 = int64_t(blockIdx.x) * gs::kTile;
  const int64_t len = g.k - t0 < gs::kTile ? g.k - t0 : gs::kTile;
  int64_t cap = 1;
  while (cap < len) cap <<= 1;
  const Word* src = g.buf_a + row * g.k + t0;
  for (int64_t j = threadIdx.x; j < cap; j += blockDim.x) tile[j] = j < len ? src[j] : bs::kExcluded;
  __syncthreads();
  bs::bitonic_steps(tile, cap, 0, 2, cap, 1);
  const bool only = g.k <= gs::kTile;
  for (int64_t j = threadIdx.x; j < len; j += blockDim.x) {
    if (only) out_row(p, row, g.k)[t0 + j] = int32_t(unsigned(tile[j]));
    else g.buf_b[row * g.k + t0 + j] = tile[j];
  }
}

// Rank order, step 2: one merge round of sorted runs of `width` words into runs of 2·width (the last run
// of a row may be shorter). A block makes kMergeTile consecutive outputs: two threads find where its
// first and last outputs split the pair of runs (merge path), the block loads exactly those inputs into
// shared memory, each thread merges kMergeItems outputs from its own diagonal there, and the block
// stores the tile whole (coalesced, where per-thread runs would use a quarter of each sector).
__global__ void __launch_bounds__(gs::kThreads) merge_kernel(TopkParams p, GridArgs g, const Word* src, Word* dst,
                                                              int64_t width, bool final_round) {
  KVSIM_DYNAMIC_SHARED(Word, buf);  // [kMergeTile] inputs, then [kMergeTile] outputs
  __shared__ long long split[2];
  const int64_t row = blockIdx.y, j0 = int64_t(blockIdx.x) * kMergeTile;
  const int64_t pair0 = j0 - j0 % (2 * width);
  const Word* a = src + row * g.k + pair0;
  const int64_t na = g.k - pair0 < width ? g.k - pair0 : width;
  const Word* b = a + na;
  const int64_t nb = g.k - pair0 - na < width ? g.k - pair0 - na : width;
  const int64_t d0 = j0 - pair0, d1 = d0 + kMergeTile < na + nb ? d0 + kMergeTile : na + nb;
  if (threadIdx.x < 2) split[threadIdx.x] = gs::merge_split(a, na, b, nb, threadIdx.x == 0 ? d0 : d1);
  __syncthreads();
  const int64_t a0 = split[0], la = split[1] - a0, b0 = d0 - a0, lb = (d1 - split[1]) - b0, len = la + lb;
  Word* const in = buf;
  Word* const out = buf + kMergeTile;
  for (int64_t j = threadIdx.x; j < len; j += blockDim.x) in[j] = j < la ? a[a0 + j] : b[b0 + j - la];
  __syncthreads();
  const int64_t diag = int64_t(threadIdx.x) * gs::kMergeItems;
  if (diag < len) {
    int64_t i = gs::merge_split(in, la, in + la, lb, diag), j = diag - i;
    for (int t = 0; t < gs::kMergeItems && diag + t < len; ++t)
      out[diag + t] = (i < la && (j >= lb || in[i] < in[la + j])) ? in[i++] : in[la + j++];
  }
  __syncthreads();
  for (int64_t j = threadIdx.x; j < len; j += blockDim.x) {
    if (final_round) out_row(p, row, g.k)[j0 + j] = int32_t(unsigned(out[j]));
    else dst[row * g.k + j0 + j] = out[j];
  }
}

int64_t pow2_at_least(int64_t x) {
  int64_t c = 1;
  while (c < x) c <<= 1;
  return c;
}

// The grid path's plan for p (k clamped): elements per slice and slices per row (1: the one-block kernel).
struct GridPlan {
  int64_t k, slice, splits;
};
GridPlan grid_plan(const TopkParams& p) {
  const int64_t k = p.k < 0 ? 0 : (p.k > p.n ? p.n : p.k);
  int64_t slice = kSlice;  // a row of at most kSlice: one block
  if (p.block_elems > 0) slice = p.block_elems < kSlice ? p.block_elems : kSlice;
  else if (p.n > kSlice)
    for (slice = kMinSlice; slice < kSlice && slice * kTargetBlocks < int64_t(p.rows) * p.n;) slice *= 2;
  return {k, slice, p.n > 0 ? (p.n + slice - 1) / slice : 1};
}
int64_t state_words() { return int64_t(sizeof(gs::RowState) / sizeof(Word)); }
// Rank order's merge rounds above the first sorted tiles: one per doubling of the run width below k.
int merge_rounds(int64_t k) {
  int rounds = 0;
  for (int64_t width = gs::kTile; width < k; width *= 2) ++rounds;
  return rounds;
}
int64_t count_words(int64_t splits) { return splits; }  // one SliceCount (8 bytes) per slice
}  // namespace

int64_t topk_workspace_words(const TopkParams& p) {
  const GridPlan g = grid_plan(p);
  if (g.k == 0) return 0;
  return g.splits > 1 ? state_words() + count_words(g.splits) + (p.rank_order ? 2 * g.k : 0) : 0;
}

int topk_launches(const TopkParams& p) {
  const GridPlan g = grid_plan(p);
  if (g.k == 0 || p.rows == 0) return 0;
  if (g.splits == 1) return 1;
  return (g.k < p.n || p.parent_kept ? 1 + gs::kPasses : 0) + 2 + (p.rank_order ? 1 + merge_rounds(g.k) : 0);
}

namespace {
// Rows longer than one slice: memset of the states, the passes (only when some element is not kept),
// the counts, the ordered compaction, and in rank order the tile sort and the merge rounds.
void grid_topk(const TopkParams& p, const GridPlan& plan) {
  if (p.rows > 65535) throw std::runtime_error("opt::topk: " + std::to_string(p.rows) + " rows of more than one slice (at most 65535: the grid's y dimension)");
  if (!p.workspace) throw std::runtime_error("opt::topk: workspace required (topk_workspace_words) for rows longer than one slice");
  const int64_t rows = p.rows;
  GridArgs g;
  g.k = plan.k, g.slice = plan.slice, g.splits = plan.splits;
  g.states = reinterpret_cast<gs::RowState*>(p.workspace);
  g.counts = reinterpret_cast<SliceCount*>(p.workspace + rows * state_words());
  g.buf_a = p.workspace + rows * (state_words() + count_words(plan.splits));
  g.buf_b = g.buf_a + rows * plan.k;
  const dim3 grid(unsigned(plan.splits), unsigned(rows));
  // Every element is kept (k = n, no filter): no pass; otherwise all passes are queued, a row's later
  // passes returning at once once its bucket is taken (the host never waits to learn when).
  const bool selected = plan.k < p.n || p.parent_kept;
  if (selected) {
    check::check(cudaMemsetAsync(g.states, 0, size_t(rows) * sizeof(gs::RowState)), "opt::topk (state memset)");
    for (int pass = 0; pass < gs::kPasses; ++pass) KVSIM_LAUNCH(select_pass_kernel, grid, gs::kThreads)(p, g, pass);
  }
  KVSIM_LAUNCH(count_kept_kernel, grid, gs::kThreads)(p, g, selected);
  KVSIM_LAUNCH(write_kept_kernel, grid, gs::kThreads)(p, g, selected);
  if (p.rank_order) {
    const int64_t tiles = (plan.k + gs::kTile - 1) / gs::kTile;
    KVSIM_LAUNCH(sort_tiles_kernel, dim3(unsigned(tiles), unsigned(rows)), kSortThreads,
                 size_t(gs::kTile) * sizeof(Word))(p, g);
    Word *src = g.buf_b, *dst = g.buf_a;
    const int rounds = merge_rounds(plan.k);
    const int64_t blocks = (plan.k + kMergeTile - 1) / kMergeTile;
    for (int r = 0; r < rounds; ++r) {
      const int64_t width = gs::kTile << r;
      KVSIM_LAUNCH(merge_kernel, dim3(unsigned(blocks), unsigned(rows)), gs::kThreads,
                   size_t(2 * kMergeTile) * sizeof(Word))(p, g, src, dst, width, r == rounds - 1);
      std::swap(src, dst);  // the next round reads what this one wrote
    }
  }
  check::check(cudaGetLastError(), "opt::topk");
}
}  // namespace

int64_t topk(const TopkParams& p) {
  if (p.n < 0 || p.rows < 0 || p.n > INT32_MAX) throw std::runtime_error("opt::topk: n outside [0, 2^31)");
  if (p.parent_kept && p.group_size <= 0) throw std::runtime_error("opt::topk: group_size <= 0");
  if (p.out_stride < 0 || (p.out_stride > 0 && p.out_stride < (p.k < p.n ? p.k : p.n)))
    throw std::runtime_error("opt::topk: out_stride " + std::to_string(p.out_stride) + " below a row's ids");
  if (p.scores_stride < 0 || (p.scores_stride > 0 && p.scores_stride < p.n))
    throw std::runtime_error("opt::topk: scores_stride " + std::to_string(p.scores_stride) + " below n");
  const GridPlan plan = grid_plan(p);
  const int64_t k = plan.k;
  if (k == 0 || p.rows == 0) return k;
  if (plan.splits > 1) return grid_topk(p, plan), k;
  // One slice (n <= 4096): rank order sorts its k <= 4096 words in shared memory (32 KiB at most).
  const int64_t cap = pow2_at_least(k);
  const size_t shared_bytes = p.rank_order ? size_t(cap) * sizeof(Word) : 0;
  KVSIM_LAUNCH(topk_kernel, p.rows, kThreads, shared_bytes)(p, k, cap);
  check::check(cudaGetLastError(), "opt::topk");  // no synchronization: the count is known here
  return k;
}

}  // namespace kvsim::opt::KVSIM_CUDA_BACKEND
