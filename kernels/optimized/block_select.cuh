// Block-wide exact selection on 64-bit rank words (hd::rank_word: order-reversed score key high, index
// low, so every word is distinct and ascending words are exactly the reference ranking), shared by the
// kernels that select inside one block: topk.cu (one row per block), chess_select.cu (the three levels
// in one block) and centroid_recall.cu (the top C' inside the recall block). Header-only because the
// .cu files are compiled separately (no relocatable device code): each kernel inlines its own copy.
//
// Every loop over the n elements runs from i0 (<= 0) in steps of blockDim, so a caller can start the
// warps on a 128-byte boundary of its array (i0 = -(misalignment in elements)): each warp's load is
// then one aligned 128-byte segment, four full 32-byte sectors, instead of straddling five. A lane
// whose index falls before the array or past its end still loads, the nearest element (in a sector
// its warp fetches anyway), and drops the value: the lanes of a warp then execute every load equally
// often, as one warp-level instruction each time — which is also how the emulator groups lanes into
// instructions when it counts sectors (the i-th execution of a load by each lane of a warp).
#pragma once
#include <cstdint>

#include "kernels/reference/cuda_common.cuh"

namespace kvsim::opt::KVSIM_CUDA_BACKEND::block_select {

using Word = unsigned long long;
constexpr int kDigitBits = 8;  // 256 shared-memory bins per pass: at most 8 passes over a 64-bit word
constexpr int kBins = 1 << kDigitBits;
constexpr int kMaxWarps = 32;  // blockDim.x <= 1024
constexpr unsigned kFullWarp = 0xffffffffu;
constexpr Word kExcluded = ~Word(0);  // the word of an element that does not compete (ranks after all)

// The block's scratch for one selection at a time; a kernel declares one `__shared__ Shared`.
struct Shared {
  unsigned hist[kBins];
  Word prefix, mask;
  long long need;
  int done;
  unsigned warp_count[kMaxWarps];
};

// First index of a loop over `base` that puts warps on 128-byte boundaries (elements of `bytes` each).
__device__ __forceinline__ int64_t aligned_start(const void* base, int bytes) {
  return -int64_t((reinterpret_cast<uintptr_t>(base) % 128) / unsigned(bytes));
}

// i clamped to [0, n - 1]: the element a lane outside the array loads (see above).
__device__ __forceinline__ int64_t clamp_index(int64_t i, int64_t n) { return i < 0 ? 0 : i >= n ? n - 1 : i; }

// Whether any lane of the calling thread's warp has an index below n in the tile starting at base
// (the same answer for every lane of the warp; blockDim is a multiple of 32).
__device__ __forceinline__ bool warp_in_range(int64_t base, int64_t n) {
  return base + int64_t(threadIdx.x & ~31u) < n;
}

// Narrows (prefix, mask) to the bucket of the k-th smallest word, most significant digit first, stopping
// as soon as that whole bucket is taken: afterwards a word w is among the k smallest iff
// (w & mask) <= prefix (and w != kExcluded). Requires 1 <= k < the number of competing words; with
// k >= that number the caller keeps every competitor (prefix = mask = 0) without calling this.
// word_at(i) for 0 <= i < n. Every thread of the block calls it (it has barriers). Thread 0 resets sh
// before the first barrier: the caller makes sure no thread still reads sh.prefix, mask, need or done
// from an earlier selection (the kernels here always run a compaction, which has barriers, between two).
template <class WordAt>
__device__ void radix_bounds(Shared& sh, int64_t i0, int64_t n, int64_t k, const WordAt& word_at, Word& prefix,
                             Word& mask) {
  const int tid = threadIdx.x;
  if (tid == 0) sh.prefix = 0, sh.mask = 0, sh.need = k, sh.done = 0;
  for (int shift = 64 - kDigitBits; shift >= 0; shift -= kDigitBits) {
    for (int d = tid; d < kBins; d += blockDim.x) sh.hist[d] = 0;
    __syncthreads();
    prefix = sh.prefix, mask = sh.mask;
    for (int64_t base = i0; warp_in_range(base, n); base += blockDim.x) {
      const int64_t i = base + tid;
      const Word w = word_at(clamp_index(i, n));
      if (i >= 0 && i < n && (w & mask) == prefix) atomicAdd(&sh.hist[(w >> shift) & (kBins - 1)], 1u);
    }
    __syncthreads();
    if (tid == 0) {  // 256 bins: a serial scan is shorter than a block scan's barriers
      long long below = 0;
      int d = 0;
      while (below + sh.hist[d] < sh.need) below += sh.hist[d++];
      sh.need -= below;
      sh.prefix |= Word(d) << shift;
      sh.mask |= Word(kBins - 1) << shift;
      sh.done = (long long)sh.hist[d] == sh.need;
    }
    __syncthreads();
    prefix = sh.prefix, mask = sh.mask;
    if (sh.done) break;  // the same shared value for every thread: a uniform exit
  }
}

__device__ __forceinline__ bool kept(Word w, Word prefix, Word mask) {
  return w != kExcluded && (w & mask) <= prefix;
}

// Ordered compaction of the kept words, one block-wide tile of blockDim elements at a time. For each
// kept element emit(tile_base, in_tile, i, w) gets its place: output position tile_base + in_tile (a
// ballot ranks it within its warp, the warps' counts within the tile). After a barrier, flush(tile_base,
// tile_count) lets the block write the tile's results with consecutive threads on consecutive
// positions (a coalesced store of the whole tile, whatever the kept pattern). Returns the kept count.
template <class WordAt, class Emit, class Flush>
__device__ int64_t compact_in_order(Shared& sh, int64_t i0, int64_t n, const WordAt& word_at, Word prefix,
                                    Word mask, const Emit& emit, const Flush& flush) {
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, warps = blockDim.x >> 5;
  int64_t written = 0;
  if (n <= 0) return 0;  // (no element to clamp a load to)
  for (int64_t base = i0; base < n; base += blockDim.x) {
    const int64_t i = base + tid;
    const Word w = warp_in_range(base, n) ? word_at(clamp_index(i, n)) : kExcluded;
    const bool keep = i >= 0 && i < n && kept(w, prefix, mask);
    const unsigned ballot = __ballot_sync(kFullWarp, keep);
    if (lane == 0) sh.warp_count[warp] = __popc(ballot);
    __syncthreads();
    int64_t in_tile = __popc(ballot & ((1u << lane) - 1u)), tile = 0;
    for (int v = 0; v < warps; ++v) {
      if (v < warp) in_tile += sh.warp_count[v];
      tile += sh.warp_count[v];
    }
    if (keep) emit(written, in_tile, i, w);
    __syncthreads();  // the tile's emits are visible to flush; warp_count is rewritten by the next tile
    flush(written, tile);
    written += tile;
  }
  return written;
}

// Kept values (ids, or rank words) written in index order through a shared buffer of 2·blockDim values
// (buf), blockDim at a time:
// every store but the last is the whole block on consecutive positions from a multiple of blockDim
// (full sectors), however few ids each tile keeps. Use put() as compact_in_order's emit, tile_done() as
// its flush, finish() after it. No barrier of its own: a thread moves down only the entry it has just
// stored, and compact_in_order's barriers separate the tiles' puts from the reads.
template <class T>
struct Stager {
  T* buf;
  T* out;
  int64_t pending = 0, flushed = 0;
  __device__ void put(int64_t in_tile, T v) { buf[pending + in_tile] = v; }
  __device__ void tile_done(int64_t tile) {
    pending += tile;
    if (pending < int64_t(blockDim.x)) return;  // the same for every thread
    const int64_t t = threadIdx.x, left = pending - int64_t(blockDim.x);
    out[flushed + t] = buf[t];
    if (t < left) buf[t] = buf[blockDim.x + t];
    flushed += blockDim.x, pending = left;
  }
  __device__ void finish() {
    if (int64_t(threadIdx.x) < pending) out[flushed + threadIdx.x] = buf[threadIdx.x];
  }
};
using IdStager = Stager<int32_t>;

// The bitonic network's steps (size, stride) for size in [size_lo, size_hi] and, of the first size, only
// the strides <= first_stride, over words[0, len) whose first element has index offset in the whole
// sequence (the direction of a pair depends on it). Every thread calls it.
__device__ inline void bitonic_steps(Word* words, int64_t len, int64_t offset, int64_t size_lo, int64_t size_hi,
                                     int64_t first_stride) {
  for (int64_t size = size_lo; size <= size_hi; size <<= 1)
    for (int64_t stride = size == size_lo ? first_stride : size / 2; stride > 0; stride >>= 1) {
      // One compare-exchange per thread and pair: pair q sorts (i, i + stride).
      for (int64_t q = threadIdx.x; q < len / 2; q += blockDim.x) {
        const int64_t i = 2 * stride * (q / stride) + q % stride, j = i + stride;
        const Word a = words[i], b = words[j];
        if ((a > b) == (((offset + i) & size) == 0)) words[i] = b, words[j] = a;
      }
      __syncthreads();
    }
}

// Bitonic sort (ascending) of cap words in shared memory, cap a power of two; every thread calls it. More
// words than a block's shared memory holds are grid_select.cuh's merge sort (topk.cu), not this.
__device__ inline void bitonic_sort(Word* words, int64_t cap) { bitonic_steps(words, cap, 0, 2, cap, 1); }

}  // namespace kvsim::opt::KVSIM_CUDA_BACKEND::block_select
