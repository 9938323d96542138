// CTKVR centroid recall + dedup (kvsim::ref::ctkvr_recall): cosine of the GQA group's queries to every
// centroid (max over the group), the top C' centroids, and the union of their qcIVF lists as sorted
// unique key ids. Two stream-ordered launches and one host synchronization (the count the caller needs):
//   1. many blocks, one warp per centroid: G cosines with float4 loads and xor-shuffle reductions, the
//      max kept; a block's 8 scores are stored together (one 32-byte sector);
//   2. one block of 1024 threads: the top C' by the radix select of block_select.cuh (rank order, the
//      reference's tie rule; C' <= 4096 sorted in shared memory), written to `chosen`; then the dedup in
//      a bitmap over the key ids held in shared memory (32 KiB: 262144 ids per window, more windows for
//      more keys, each one re-reading the chosen lists from L2): a warp per chosen centroid reads its
//      qcIVF row coalesced and sets the bits with shared atomics — one bit per key, no sort (the
//      reference sorts C'·rho ids), no global atomics, no memset; finally the set bits are written in
//      order, each warp store 32 consecutive ids of an aligned 128-byte segment (write_set_bits).
// Design and bound: kernels/optimized/README.md.
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

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
constexpr int kWarps = kThreads / 32;
constexpr int kRecallThreads = 1024;
constexpr int64_t kSortWords = 4096;                 // the top C' sorted in shared memory: 32 KiB
constexpr int64_t kWindowWords = kSortWords * 2;     // the same 32 KiB as the dedup bitmap's window
constexpr int64_t kWindowIds = kWindowWords * 32;    // 262144 key ids per window
constexpr unsigned kFullWarp = 0xffffffffu;

__device__ __forceinline__ float warp_sum(float x) {
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(kFullWarp, x, o);
  return x;
}

// Warp w of the grid scores centroid w. d % 4 == 0 (checked by the launcher) for the float4 path.
// Six blocks per SM: ptxas then stays at 40 registers on sm_80 too (48 without), no spill.
__global__ void __launch_bounds__(kThreads, 6) centroid_cosine_kernel(CentroidRecallParams p) {
  __shared__ float block_scores[kWarps];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t c0 = int64_t(blockIdx.x) * kWarps, c = c0 + warp, head = blockIdx.y;
  const float* const qh = p.q + head * p.G * p.d;
  const float* const ch = p.centroids + head * p.G * p.C * p.d;
  if (c < p.C) {  // the same for every lane of a warp, so the shuffles see the whole warp
    float best = -INFINITY;
    for (int g = 0; g < p.G; ++g) {
      const float4* q = reinterpret_cast<const float4*>(qh + int64_t(g) * p.d);
      const float4* x = reinterpret_cast<const float4*>(ch + (int64_t(g) * p.C + c) * p.d);
      float qx = 0.f, qq = 0.f, xx = 0.f;
      for (int i = lane; i < p.d / 4; i += 32) {
        const float4 a = __ldg(q + i), b = __ldg(x + i);  // one 16-byte load each (paged_decode.cu's load4)
        qx += a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w;
        qq += a.x * a.x + a.y * a.y + a.z * a.z + a.w * a.w;
        xx += b.x * b.x + b.y * b.y + b.z * b.z + b.w * b.w;
      }
      qx = warp_sum(qx), qq = warp_sum(qq), xx = warp_sum(xx);
      const float den = sqrtf(qq) * sqrtf(xx);
      const float cosv = den > 0.f ? qx / den : 0.f;  // a zero vector scores 0, as score_gemv has it
      best = fmaxf(best, cosv);
    }
    if (lane == 0) block_scores[warp] = best;
  }
  __syncthreads();
  if (threadIdx.x < kWarps && c0 + threadIdx.x < p.C)
    p.centroid_scores[head * p.C + c0 + threadIdx.x] = block_scores[threadIdx.x];
}

// The ids of the set bits of bits[0, nwords) (shared memory; bit b of word w is id id_base + 32 w + b),
// ascending, to out[pos0, ...); returns how many. Per tile of blockDim words: a block scan of the
// words' popcounts (warp scans, then the warps' totals) gives each word the rank of its first id, kept
// in excl[]; then the block writes the tile's ids with consecutive threads on consecutive output
// positions, from the 128-byte boundary at or below the first one: thread q finds the word holding its
// rank (binary search over excl) and the rank's set bit in it. Every warp store is one aligned 128-byte
// segment whatever the bit density; only the tile's first and last segments can be partial.
__device__ int64_t write_set_bits(bs::Shared& sh, int* excl, const unsigned* bits, int64_t nwords, int64_t id_base,
                                  int32_t* out, int64_t pos0) {
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, warps = blockDim.x >> 5;
  int64_t written = 0;
  for (int64_t base = 0; base < nwords; base += blockDim.x) {
    const int64_t wi = base + tid;
    const int cnt = wi < nwords ? __popc(bits[wi]) : 0;
    int incl = cnt;
    for (int o = 1; o < 32; o <<= 1) {
      const int up = __shfl_up_sync(kFullWarp, incl, o);
      if (lane >= o) incl += up;
    }
    if (lane == 31) sh.warp_count[warp] = unsigned(incl);
    __syncthreads();
    int before = incl - cnt, tile = 0;
    for (int v = 0; v < warps; ++v) {
      if (v < warp) before += int(sh.warp_count[v]);
      tile += int(sh.warp_count[v]);
    }
    excl[tid] = before;
    __syncthreads();
    const int64_t start = pos0 + written;
    for (int64_t q = (start & ~int64_t(31)) + tid; q < start + tile; q += blockDim.x) {
      const int64_t m = q - start;  // this position's rank among the tile's ids
      if (m < 0) continue;
      int lo = 0, hi = int(blockDim.x) - 1;  // the last word whose first rank is <= m holds rank m
      while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        if (excl[mid] <= m) lo = mid; else hi = mid - 1;
      }
      unsigned x = bits[base + lo];
      for (int64_t r = m - excl[lo]; r > 0; --r) x &= x - 1;  // drop the lower set bits
      out[q] = int32_t(id_base + (base + lo) * 32 + (__ffs(int(x)) - 1));
    }
    written += tile;
    __syncthreads();  // warp_count and excl are rewritten by the next tile
  }
  return written;
}

// One block per head: the top C' centroids (rank order) to its chosen, then the sorted union of their
// lists. minBlocksPerSM 1 lets ptxas use up to 64 registers instead of spilling.
__global__ void __launch_bounds__(kRecallThreads, 1) recall_kernel(CentroidRecallParams p, int cp, int64_t cap) {
  __shared__ bs::Shared sh;
  __shared__ int excl[kRecallThreads];  // write_set_bits: the first rank of each word of a tile
  KVSIM_DYNAMIC_SHARED(Word, words);    // 32 KiB: first the top C' words, then the bitmap window
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, warps = blockDim.x >> 5;
  const int64_t head = blockIdx.x;
  const float* s = p.centroid_scores + head * p.C;
  int32_t* const chosen = p.chosen + head * cp;
  const int32_t* const ivf = p.ivf + head * p.C * p.rho;
  const auto word_at = [&](int64_t i) { return ::kvsim::ref::hd::rank_word(s[i], int32_t(i)); };
  const int64_t i0 = bs::aligned_start(s, sizeof(float));
  Word prefix = 0, mask = 0;
  if (cp < p.C) bs::radix_bounds(sh, i0, p.C, cp, word_at, prefix, mask);
  bs::compact_in_order(sh, i0, p.C, word_at, prefix, mask,
                       [&](int64_t base, int64_t in_tile, int64_t, Word w) { words[base + in_tile] = w; },
                       [](int64_t, int64_t) {});
  for (int64_t j = cp + tid; j < cap; j += blockDim.x) words[j] = bs::kExcluded;
  __syncthreads();
  bs::bitonic_sort(words, cap);
  for (int64_t j = tid; j < cp; j += blockDim.x) chosen[j] = int32_t(unsigned(words[j]));
  __syncthreads();  // chosen is visible to the whole block, and the words are free for the bitmap

  unsigned* bits = reinterpret_cast<unsigned*>(words);
  int64_t total = 0;
  for (int64_t lo = 0; lo < p.num_keys; lo += kWindowIds) {
    const int64_t ids = p.num_keys - lo < kWindowIds ? p.num_keys - lo : kWindowIds, nwords = (ids + 31) / 32;
    for (int64_t w = tid; w < nwords; w += blockDim.x) bits[w] = 0u;
    __syncthreads();
    // A warp takes 32 chosen centroids at a time (one coalesced load), then each one's row: rho ids,
    // contiguous, read from a 128-byte boundary on. Lanes outside the list or the row load its nearest
    // entry and drop it, so every lane of the warp executes each load equally often (block_select.cuh).
    for (int64_t j0 = int64_t(warp) * 32; j0 < cp; j0 += int64_t(warps) * 32) {
      const int32_t mine = chosen[bs::clamp_index(j0 + lane, cp)];
      const int rows = cp - j0 < 32 ? int(cp - j0) : 32;
      for (int e = 0; e < rows; ++e) {
        const int32_t* row = ivf + int64_t(__shfl_sync(kFullWarp, mine, e)) * p.rho;
        for (int64_t r0 = bs::aligned_start(row, sizeof(int32_t)); r0 < p.rho; r0 += 32) {
          const int64_t r = r0 + lane;
          const int64_t id = int64_t(row[bs::clamp_index(r, p.rho)]) - lo;
          if (r >= 0 && r < p.rho && id >= 0 && id < ids) atomicOr(&bits[id >> 5], 1u << (id & 31));
        }
      }
    }
    __syncthreads();
    total += write_set_bits(sh, excl, bits, nwords, lo, p.out + head * cp * p.rho, total);
  }
  if (tid == 0) p.count[head] = int32_t(total);
}

int64_t pow2_at_least(int64_t x) {
  int64_t c = 1;
  while (c < x) c <<= 1;
  return c;
}
}  // namespace

int64_t centroid_recall(const CentroidRecallParams& p) {
  const auto fail = [](const char* why) { throw std::runtime_error(std::string("opt::centroid_recall: ") + why); };
  if (p.G <= 0 || p.C < 0 || p.rho < 0 || p.num_keys < 0) fail("negative size");
  if (p.heads < 1 || p.heads > 65535) fail("heads outside [1, 65535]");
  if (p.d <= 0 || p.d % 4 != 0) fail("d must be a positive multiple of 4 (float4 loads)");
  if (!p.chosen || !p.centroid_scores || !p.count) fail("scratch missing");
  const int cp = p.c_prime < 0 ? 0 : (p.c_prime > p.C ? p.C : p.c_prime);
  if (cp == 0 || p.rho == 0) return 0;
  if (cp > kSortWords) fail("C' above 4096 (the top C' is sorted in shared memory)");
  KVSIM_LAUNCH(centroid_cosine_kernel, dim3(check::blocks_for(p.C, kWarps), unsigned(p.heads)), kThreads)(p);
  check::check(cudaGetLastError(), "opt::centroid_recall (cosine)");
  // Stream-ordered after the cosines: no synchronization between the launches.
  KVSIM_LAUNCH(recall_kernel, unsigned(p.heads), kRecallThreads, size_t(kSortWords) * sizeof(Word))(p, cp,
                                                                                                 pow2_at_least(cp));
  check::check(cudaGetLastError(), "opt::centroid_recall (recall)");
  // The one host synchronization: the caller needs the counts (p.count keeps each head's).
  std::vector<int32_t> counts(size_t(p.heads));
  check::check(cudaMemcpy(counts.data(), p.count, counts.size() * sizeof(int32_t), cudaMemcpyDeviceToHost),
               "opt::centroid_recall (count)");
  int64_t total = 0;
  for (int32_t n : counts) total += n;
  return total;
}

}  // namespace kvsim::opt::KVSIM_CUDA_BACKEND
