// CTKVR centroid recall + dedup (kvsim::ref::ctkvr_recall): cosine of the GQA group's queries to every
// centroid (max over the group), the top C' centroids, and the union of their qcIVF lists as sorted
// unique key ids. Four launches, each one pass over its data:
//   1. one warp per centroid: G cosines with float4 loads and xor-shuffle reductions, the max kept;
//   2. the top C' centroids by topk.cu (rank order, the reference's tie rule);
//   3. one thread per recalled id: atomicOr of its bit in a bitmap over the key ids — the dedup costs
//      one bit per key and no sort (the reference sorts C'·rho ids);
//   4. one block walks the bitmap in order: each thread one 32-bit word, a block scan of the words'
//      popcounts places its set bits, so the ids come out ascending, as dedup() returns them.
// Design and bound: kernels/optimized/README.md.
#include <cmath>
#include <stdexcept>
#include <string>

#include "kernels/optimized/cuda.hpp"
#include "kernels/reference/cuda_common.cuh"

namespace kvsim::opt::KVSIM_CUDA_BACKEND {
namespace {
namespace check = ::kvsim::ref::KVSIM_CUDA_BACKEND::detail;

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr unsigned kFullWarp = 0xffffffffu;

__device__ __forceinline__ float warp_sum(float x) {
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(kFullWarp, x, o);
  return x;
}

// Warp w of the grid scores centroid w. d % 4 == 0 (checked by the launcher) for the float4 path.
__global__ void __launch_bounds__(kThreads) centroid_cosine_kernel(CentroidRecallParams p) {
  const int lane = threadIdx.x & 31;
  const int64_t c = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  if (c >= p.C) return;  // whole warps leave together: blockDim is a multiple of 32
  float best = -INFINITY;
  for (int g = 0; g < p.G; ++g) {
    const float4* q = reinterpret_cast<const float4*>(p.q + int64_t(g) * p.d);
    const float4* x = reinterpret_cast<const float4*>(p.centroids + (int64_t(g) * p.C + c) * p.d);
    float qx = 0.f, qq = 0.f, xx = 0.f;
    for (int i = lane; i < p.d / 4; i += 32) {
      const float4 a = q[i], b = x[i];
      qx += a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w;
      qq += a.x * a.x + a.y * a.y + a.z * a.z + a.w * a.w;
      xx += b.x * b.x + b.y * b.y + b.z * b.z + b.w * b.w;
    }
    qx = warp_sum(qx), qq = warp_sum(qq), xx = warp_sum(xx);
    const float den = sqrtf(qq) * sqrtf(xx);
    const float cosv = den > 0.f ? qx / den : 0.f;  // a zero vector scores 0, as score_gemv has it
    best = fmaxf(best, cosv);
  }
  if (lane == 0) p.centroid_scores[c] = best;
}

__global__ void __launch_bounds__(kThreads) mark_ivf_kernel(CentroidRecallParams p, int chosen_count) {
  const int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= int64_t(chosen_count) * p.rho) return;
  const int32_t id = p.ivf[int64_t(p.chosen[j / p.rho]) * p.rho + j % p.rho];
  atomicOr(&p.bitmap[id >> 5], 1u << (id & 31));
}

// One block: tiles of blockDim bitmap words, ascending; an inclusive warp scan of the popcounts, the
// warps' totals through shared memory, then each thread writes its word's ids in bit order.
__global__ void __launch_bounds__(kThreads) compact_bitmap_kernel(CentroidRecallParams p, int64_t words) {
  __shared__ int warp_total[kWarps];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  int64_t written = 0;
  for (int64_t base = 0; base < words; base += blockDim.x) {
    const int64_t wi = base + tid;
    const unsigned bits = wi < words ? p.bitmap[wi] : 0u;
    const int cnt = __popc(bits);
    int incl = cnt;
    for (int o = 1; o < 32; o <<= 1) {
      const int up = __shfl_up_sync(kFullWarp, incl, o);
      if (lane >= o) incl += up;
    }
    if (lane == 31) warp_total[warp] = incl;
    __syncthreads();
    int64_t pos = written + incl - cnt, tile = 0;
    for (int v = 0; v < kWarps; ++v) {
      if (v < warp) pos += warp_total[v];
      tile += warp_total[v];
    }
    for (unsigned b = bits; b; b &= b - 1) p.out[pos++] = int32_t(wi * 32 + (__ffs(int(b)) - 1));
    written += tile;
    __syncthreads();  // warp_total is rewritten by the next tile
  }
  if (tid == 0) *p.count = int32_t(written);
}
}  // namespace

int64_t centroid_recall(const CentroidRecallParams& p) {
  const auto fail = [](const char* why) { throw std::runtime_error(std::string("opt::centroid_recall: ") + why); };
  if (p.G <= 0 || p.C < 0 || p.rho < 0 || p.num_keys < 0) fail("negative size");
  if (p.d <= 0 || p.d % 4 != 0) fail("d must be a positive multiple of 4 (float4 loads)");
  if (!p.chosen || !p.centroid_scores || !p.bitmap || !p.count) fail("scratch missing");
  const int cp = p.c_prime < 0 ? 0 : (p.c_prime > p.C ? p.C : p.c_prime);
  if (cp == 0 || p.rho == 0) return 0;
  KVSIM_LAUNCH(centroid_cosine_kernel, check::blocks_for(int64_t(p.C) * 32, kThreads),
               kThreads)(p);
  check::check_launch("opt::centroid_recall (cosine)");
  TopkParams t;
  t.scores = p.centroid_scores, t.out = p.chosen, t.rows = 1, t.n = p.C, t.k = cp, t.rank_order = true;
  if (topk_workspace_words(cp, p.C) > 0) fail("C' above 4096 (the top-k would need a workspace)");
  topk(t);
  const int64_t words = (p.num_keys + 31) / 32;
  check::check(cudaMemsetAsync(p.bitmap, 0, size_t(words) * sizeof(unsigned)), "opt::centroid_recall (memset)");
  KVSIM_LAUNCH(mark_ivf_kernel, check::blocks_for(int64_t(cp) * p.rho, kThreads), kThreads)(p, cp);
  check::check_launch("opt::centroid_recall (mark)");
  KVSIM_LAUNCH(compact_bitmap_kernel, 1, kThreads)(p, words);
  check::check_launch("opt::centroid_recall (compact)");
  int32_t count = 0;
  check::check(cudaMemcpy(&count, p.count, sizeof count, cudaMemcpyDeviceToHost), "opt::centroid_recall (count)");
  return count;
}

}  // namespace kvsim::opt::KVSIM_CUDA_BACKEND
