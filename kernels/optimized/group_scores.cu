// The score GEMV at batch 1 as a deployment runs it: every query head's score over every vector of its
// KV head, for every KV head of a layer in ONE launch. It serves SentenceKV's `sentence_score` (the
// group's queries against the sentence mean keys: dot·scale) and Quest's `page_bound` (each page's
// upper bound Σ_c max(q_c·min_c, q_c·max_c) from its channel minima and maxima). The replay keeps
// its exact twins (exact_scores.cu, quest_pages.cu: the host's summation order, a thread per row
// reading it alone, 13% of the fetched sectors used); this is what the phases cost on a GPU.
//
// A block of 8 warps serves one KV head (grid.y) and 8 tiles of 8 vectors (grid.x). The group's
// queries sit in shared memory. A warp reads its tile's vectors as float4s, 32 consecutive ones per
// instruction (up to 512 contiguous bytes: every sector whole): a vector of d floats is d / 4 float4s, held
// by min(32, d / 4) lanes (a d of 256 takes two instructions per vector); each lane folds its float4
// into one partial per query head of the group, shuffles reduce them, and the tile's 32 scores of each
// head leave as coalesced rows (each lane collects its vector's scores by shuffles). Each vector is read once for the whole group.
// Bound: the vectors once (twice for Quest: min and max), the scores written, the queries once: HBM.
#include <stdexcept>
#include <string>

#include "kernels/optimized/cuda.hpp"
#include "kernels/reference/cuda_common.cuh"
#include "kernels/reference/hd.hpp"

namespace kvsim::opt::KVSIM_CUDA_BACKEND {
namespace {
namespace check = ::kvsim::ref::KVSIM_CUDA_BACKEND::detail;
namespace hd = ::kvsim::ref::hd;
// A warp per tile of 8 vectors: 8 dependent loads a lane at d = 128 (16 for Quest's min and max), and a
// tile's scores of one head are one 32-byte sector.
constexpr int kThreads = 256, kWarps = kThreads / 32, kTile = 8;
constexpr int kMaxGroup = 32, kMaxDim = 256;
constexpr int kMaxQueryFloats = 4096;  // group x d: the group's queries in shared memory (16 KiB)
constexpr unsigned kFullWarp = 0xffffffffu;

// kCap: the most heads of a group the registers hold (acc and mine: 2 kCap floats a thread); 8 covers
// every GQA group of the library's models at 103 -> ~40 registers, 32 the rest.
template <bool kBound, int kCap>
__global__ void __launch_bounds__(kThreads) group_scores_kernel(GroupScoreParams p) {
  __shared__ float4 qs[kMaxQueryFloats / 4];
  const int kv = blockIdx.y, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int quads = p.d / 4, G = p.group;
  const float4* const q = reinterpret_cast<const float4*>(p.q + int64_t(kv) * G * p.d);
  for (int i = tid; i < G * quads; i += kThreads) qs[i] = q[i];
  __syncthreads();
  const int lanes = quads < 32 ? quads : 32, rows_per_load = 32 / lanes, chunks = quads / lanes;  // rows past the tile load nothing
  const int64_t base = int64_t(kv) * p.n * quads;
  const float4* const lo = reinterpret_cast<const float4*>(p.vectors) + base;
  const float4* const hi = kBound ? reinterpret_cast<const float4*>(p.hi) + base : nullptr;
  for (int64_t tile = (int64_t(blockIdx.x) * kWarps + warp) * kTile; tile < p.n;
       tile += int64_t(gridDim.x) * kWarps * kTile) {
    const int valid = p.n - tile < kTile ? int(p.n - tile) : kTile;
    float mine[kCap];  // lane l < 8: each head's score of the tile's vector l
    KVSIM_UNROLL for (int g = 0; g < kCap; ++g) mine[g] = 0.f;
    for (int r0 = 0; r0 < kTile; r0 += rows_per_load) {
      const int row = r0 + lane / lanes;
      float acc[kCap];
      KVSIM_UNROLL for (int g = 0; g < kCap; ++g) acc[g] = 0.f;
      for (int j = 0; j < chunks; ++j) {
        const int quad = j * lanes + lane % lanes;
        if (row < valid) {
          const int64_t at = (tile + row) * quads + quad;
          const float4 a = lo[at];
          const float4 b = kBound ? hi[at] : a;
          KVSIM_UNROLL for (int g = 0; g < kCap; ++g) {
            if (g >= G) break;
            const float4 x = qs[g * quads + quad];
            if (kBound) {
              acc[g] += hd::quest_channel_bound(x.x, a.x, b.x) + hd::quest_channel_bound(x.y, a.y, b.y) +
                        hd::quest_channel_bound(x.z, a.z, b.z) + hd::quest_channel_bound(x.w, a.w, b.w);
            } else {
              acc[g] += x.x * a.x + x.y * a.y + x.z * a.z + x.w * a.w;
            }
          }
        }
      }
      KVSIM_UNROLL for (int g = 0; g < kCap; ++g) {
        if (g >= G) break;
        float v = acc[g];
        for (int off = lanes / 2; off > 0; off >>= 1) v += __shfl_xor_sync(kFullWarp, v, off);
        // Every lane of vector r0 + i's lanes holds its total; lane r0 + i takes it from the first.
        const int from = lane >= r0 && lane < r0 + rows_per_load ? (lane - r0) * lanes : 0;
        v = __shfl_sync(kFullWarp, v, from);
        if (lane >= r0 && lane < r0 + rows_per_load) mine[g] = kBound ? v : v * p.scale;
      }
    }
    if (lane < valid) {
      KVSIM_UNROLL for (int g = 0; g < kCap; ++g) {
        if (g >= G) break;
        p.out[(int64_t(kv) * G + g) * p.n + tile + lane] = mine[g];
      }
    }
  }
}
}  // namespace

void group_scores(const GroupScoreParams& p) {
  const auto fail = [](const std::string& why) { throw std::runtime_error("opt::group_scores: " + why); };
  if (p.kv_heads < 0 || p.n < 0) fail("kv_heads " + std::to_string(p.kv_heads) + ", n " + std::to_string(p.n));
  if (p.group < 1 || p.group > kMaxGroup) fail("group " + std::to_string(p.group) + " outside [1, 32]");
  if (int64_t(p.group) * p.d > kMaxQueryFloats)
    fail("group x d = " + std::to_string(int64_t(p.group) * p.d) + " above 4096 (the queries in shared memory)");
  const int quads = p.d / 4;
  if (p.d < 4 || p.d > kMaxDim || p.d % 4 || (quads & (quads - 1)))
    fail("d " + std::to_string(p.d) + " is not 4 times a power of two up to 256");
  if (p.kv_heads == 0 || p.n == 0) return;
  if (!p.q || !p.vectors || !p.out) fail("a buffer is missing");
  if (reinterpret_cast<uintptr_t>(p.vectors) % 16 || reinterpret_cast<uintptr_t>(p.q) % 16 ||
      (p.hi && reinterpret_cast<uintptr_t>(p.hi) % 16))
    fail("q, vectors and hi must be 16-byte aligned");
  const int64_t tiles = (p.n + kTile - 1) / kTile;
  const dim3 grid(unsigned((tiles + kWarps - 1) / kWarps), unsigned(p.kv_heads));
  const bool small = p.group <= 8;
  if (p.hi && small) KVSIM_LAUNCH((group_scores_kernel<true, 8>), grid, kThreads)(p);
  else if (p.hi) KVSIM_LAUNCH((group_scores_kernel<true, kMaxGroup>), grid, kThreads)(p);
  else if (small) KVSIM_LAUNCH((group_scores_kernel<false, 8>), grid, kThreads)(p);
  else KVSIM_LAUNCH((group_scores_kernel<false, kMaxGroup>), grid, kThreads)(p);
  check::check(cudaGetLastError(), "opt::group_scores");
}

}  // namespace kvsim::opt::KVSIM_CUDA_BACKEND
