// Grid-wide exact selection on 64-bit rank words (hd::rank_word, as in block_select.cuh): one row is
// split into slices of a few thousand elements, one block per slice, so a single long row (a batch-1
// decode step's 128K scores) fills the GPU instead of one SM. Used by topk.cu for rows longer than one
// slice; rows that fit one slice keep block_select's one-block kernel.
//
// The select is a most-significant-digit-first radix select in passes of kDigitBits bits, one launch per
// pass (a grid-wide barrier between passes, without cooperative launch: the emulator and every GPU run
// it). In a pass every block histograms the words of its slice that still match the row's (prefix,
// mask) into shared memory, adds its non-zero bins to the row's global histogram with atomics, fences,
// and takes a ticket; the block that takes the last ticket of its row (the threadfence + counter
// pattern) sees every block's bins, scans them, narrows (prefix, mask, need) to the bucket of the k-th
// smallest word, and clears the histogram and the ticket for the next pass. A row whose bucket is wholly
// taken is done: the later passes' blocks of that row return at once.
//
// Only the top 33 bits are selected in passes (3 of 11 bits): the 32-bit score key and index bit 31,
// which is 0 for every competitor and 1 in kExcluded. What is left in the bucket then are words of one
// score, which rank by index: the compaction takes the first `need` of them in index order
// (compact_with_ties), instead of three more passes over the index bits. So a word w is kept iff
// (w & mask) < prefix, or (w & mask) == prefix and fewer than need words of the bucket precede it.
//
// Why 11-bit digits: the 32 bits of the score key resolve in 3 passes instead of 4 (8-bit digits), and
// a pass costs a launch (~a microsecond or two on an H100) however little it reads; 2048 bins (8 KiB)
// are scanned by a 256-thread block in one shuffle scan. Why no candidate buffers (AIR top-k's): at the
// sizes a decode step selects over (≤ a few million scores per step), a pass re-reading the row costs
// less than the launch it sits in; the launches, not the bytes, bound this select (kernels/optimized/
// README.md, "Top-k").
//
// Rank order for more than one tile of survivors is a merge sort: tiles of kTile words sorted in shared
// memory (block_select::bitonic_steps), then rounds of merge-path merges, each thread producing
// kMergeItems outputs after one binary search of its diagonal — every round a launch over all rows.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/optimized/block_select.cuh"

namespace kvsim::opt::KVSIM_CUDA_BACKEND::grid_select {

using Word = block_select::Word;
constexpr int kDigitBits = 11;
constexpr int kBins = 1 << kDigitBits;
constexpr int kPasses = 3;  // bits 63..31: the score key and index bit 31 (ties resolved by index after)
static_assert(kDigitBits * kPasses == 33, "the passes end exactly below the score key and bit 31");
constexpr int kThreads = 256;                                 // every grid_select kernel's block
constexpr int kBinsPerThread = kBins / kThreads;              // the scan: 8 consecutive bins per thread
constexpr int64_t kTile = 4096;                               // words a block sorts in shared memory (32 KiB)
constexpr int kMergeItems = 8;                                // outputs per thread and merge round
static_assert(kBins % kThreads == 0, "the scan gives each thread whole bins");

// The lowest bit of pass `pass`'s digit and the digit's width (the last pass takes what is left).
__host__ __device__ constexpr int pass_shift(int pass) {
  return 64 - kDigitBits * (pass + 1) < 0 ? 0 : 64 - kDigitBits * (pass + 1);
}
__host__ __device__ constexpr int pass_width(int pass) { return 64 - kDigitBits * pass - pass_shift(pass); }

// A row's select state in global memory. Zeroed before the first pass (the launcher's memset); each
// pass's last block leaves hist and ticket zero again. The header (prefix .. ticket) is one 32-byte
// sector, which a block reads with one warp instruction (load_header).
struct RowState {
  Word prefix, mask;
  long long need;  // survivors still to take inside the current bucket
  int done;        // the bucket is wholly taken: later passes skip the row
  unsigned ticket;
  unsigned hist[kBins];
};
static_assert(sizeof(RowState) % 32 == 0 && offsetof(RowState, hist) == 32, "one header sector per row");

// A row's bucket as every thread of a block holds it (registers: never a copy of the histogram).
struct Header {
  Word prefix, mask;
  long long need;
  int done;
};

// The header of st copied to every thread: lanes 0-3 of warp 0 load its four words (one full sector,
// where 256 threads each loading the fields would fetch it once per warp and field) into hdr, a
// 4-word shared array; a barrier publishes it. Every thread of the block calls it.
__device__ inline Header load_header(const RowState& st, Word* hdr) {
  if (threadIdx.x < 4) hdr[threadIdx.x] = reinterpret_cast<const Word*>(&st)[threadIdx.x];
  __syncthreads();
  return {hdr[0], hdr[1], (long long)hdr[2], int(unsigned(hdr[3]))};  // (done is the low half: little endian)
}

// Runs fn(i, valid) over the slice [lo, hi) of a row of n elements, one block-wide tile per step, the
// first tile starting at i0 (<= lo, a 128-byte boundary: block_select.cuh): a lane outside the slice
// gets valid = false and an index clamped into the slice (it loads a word its warp's sectors hold and
// drops it). Every lane of a warp calls fn equally often.
template <class Fn>
__device__ void for_slice(int64_t i0, int64_t lo, int64_t hi, const Fn& fn) {
  for (int64_t base = i0; base + int64_t(threadIdx.x & ~31u) < hi; base += blockDim.x) {
    const int64_t i = base + threadIdx.x;
    fn(i < lo ? lo : i >= hi ? hi - 1 : i, i >= lo && i < hi);
  }
}

// The pass's end for the block that took its row's last ticket: narrows st to the bucket of the need-th
// smallest word (k on the first pass, else st.need as the block read it) among the words counted in
// st.hist, clears st.hist and st.ticket. scratch: kBins + kThreads / 32 unsigned of shared memory.
// Every thread of that block calls it.
__device__ inline void close_pass(RowState& st, unsigned* scratch, int pass, long long need) {
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  unsigned* const bins = scratch;
  unsigned* const warp_total = scratch + kBins;
  for (int d = tid; d < kBins; d += blockDim.x) bins[d] = st.hist[d], st.hist[d] = 0;
  __syncthreads();
  // Exclusive prefix of the bins, kBinsPerThread consecutive bins per thread: a warp shuffle scan of the
  // threads' sums, then the warps' totals.
  unsigned own = 0;
  for (int j = 0; j < kBinsPerThread; ++j) own += bins[tid * kBinsPerThread + j];
  unsigned incl = own;
  for (int off = 1; off < 32; off <<= 1) {
    const unsigned v = __shfl_up_sync(block_select::kFullWarp, incl, off);
    if (lane >= off) incl += v;
  }
  if (lane == 31) warp_total[warp] = incl;
  __syncthreads();
  long long below = incl - own;
  for (int w = 0; w < warp; ++w) below += warp_total[w];
  // Exactly one thread holds the bin where the running count reaches need (1 <= need <= the total).
  if (below < need && below + own >= need) {
    int d = tid * kBinsPerThread;
    while (below + bins[d] < need) below += bins[d++];
    const int shift = pass_shift(pass);
    st.need = need - below;
    st.prefix |= Word(d) << shift;
    st.mask |= ((Word(1) << pass_width(pass)) - 1) << shift;
    st.done = (long long)bins[d] == need - below;
  }
  if (tid == 0) st.ticket = 0;
}

// Ordered compaction of one slice [0, n) (word_at(i), 0 <= i < n; tiles from i0 <= 0 as in
// block_select::compact_in_order) keeping every word with (w & mask) < prefix and, of the bucket's words
// ((w & mask) == prefix), those whose rank in index order in the whole row is below need, tie_base of
// the bucket lying in earlier slices. emit(tile_base, in_tile, i, w) and flush(tile_base, tile_count) as
// in compact_in_order. warp_keep, warp_tie: blockDim / 32 unsigned each of shared memory. Every thread
// of the block calls it.
template <class WordAt, class Emit, class Flush>
__device__ void compact_with_ties(unsigned* warp_keep, unsigned* warp_tie, int64_t i0, int64_t n,
                                  const WordAt& word_at, Word prefix, Word mask, long long tie_base, long long need,
                                  const Emit& emit, const Flush& flush) {
  namespace bs = block_select;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, warps = blockDim.x >> 5;
  const unsigned below_lane = (1u << lane) - 1u;
  int64_t written = 0;
  long long ties = tie_base;
  for (int64_t base = i0; base < n; base += blockDim.x) {
    const int64_t i = base + tid;
    const Word w = bs::warp_in_range(base, n) ? word_at(bs::clamp_index(i, n)) : bs::kExcluded;
    const bool valid = i >= 0 && i < n && w != bs::kExcluded;
    const bool strict = valid && (w & mask) < prefix, tie = valid && (w & mask) == prefix;
    const unsigned tie_ballot = __ballot_sync(bs::kFullWarp, tie);
    if (lane == 0) warp_tie[warp] = __popc(tie_ballot);
    __syncthreads();
    long long tie_rank = ties + __popc(tie_ballot & below_lane), tile_ties = 0;
    for (int v = 0; v < warps; ++v) {
      if (v < warp) tie_rank += warp_tie[v];
      tile_ties += warp_tie[v];
    }
    const bool keep = strict || (tie && tie_rank < need);
    const unsigned keep_ballot = __ballot_sync(bs::kFullWarp, keep);
    if (lane == 0) warp_keep[warp] = __popc(keep_ballot);
    __syncthreads();  // every warp has read warp_tie; warp_keep is complete
    int64_t in_tile = __popc(keep_ballot & below_lane), tile = 0;
    for (int v = 0; v < warps; ++v) {
      if (v < warp) in_tile += warp_keep[v];
      tile += warp_keep[v];
    }
    if (keep) emit(written, in_tile, i, w);
    __syncthreads();  // the tile's emits are visible to flush; warp_keep is rewritten by the next tile
    flush(written, tile);
    written += tile, ties += tile_ties;
  }
}

// Merge path: the number of elements of a[0, na) among the first diag outputs of merging sorted a and
// b[0, nb) (distinct words, so no tie rule is needed).
__device__ inline int64_t merge_split(const Word* a, int64_t na, const Word* b, int64_t nb, int64_t diag) {
  int64_t lo = diag > nb ? diag - nb : 0, hi = diag < na ? diag : na;
  while (lo < hi) {
    const int64_t mid = (lo + hi) / 2;
    if (a[mid] < b[diag - 1 - mid]) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

}  // namespace kvsim::opt::KVSIM_CUDA_BACKEND::grid_select
