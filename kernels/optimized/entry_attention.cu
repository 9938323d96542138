// Attention over assembled entries (SEKV's coarse span means with bias log|S| and its reconstructed
// tokens; kvsim::ref::biased_attention) and the merge of two partial states (ref::merge_state). One warp
// per query row: each lane owns d/32 channels (a strided slice: lane, lane + 32, ...), the dot of an entry
// is reduced with xor shuffles, and every lane keeps the same online-softmax state (hd::OnlineSoftmax, as
// the reference), so the loop has no barrier and no shared memory. Outputs agree with the host to float
// rounding (another summation order): the replay's output tolerance. Bound: rows·m·d·4·2 bytes (each
// row reads the entries; they stay in L2 across the rows of a group), 4·rows·m·d FLOPs; memory-bound.
// The merge is one thread per output element (each reads only its own inputs, so out may alias a).
#include <stdexcept>
#include <string>

#include "kernels/optimized/cuda.hpp"
#include "kernels/reference/cuda_common.cuh"
#include "kernels/reference/hd.hpp"

namespace kvsim::opt::KVSIM_CUDA_BACKEND {
namespace {
namespace check = ::kvsim::ref::KVSIM_CUDA_BACKEND::detail;
namespace hd = ::kvsim::ref::hd;
constexpr int kThreads = 128;
constexpr int kMaxPerLane = 8;  // channels per lane: d <= 256
constexpr unsigned kFullWarp = 0xffffffffu;

__global__ void __launch_bounds__(kThreads) biased_attention_kernel(BiasedAttentionParams p) {
  const int lane = threadIdx.x & 31;
  const int row = int((int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32);
  if (row >= p.rows) return;  // whole warps: blockDim is a multiple of 32
  const int per = (p.d + 31) / 32;
  float q[kMaxPerLane], acc[kMaxPerLane];
  for (int j = 0; j < per; ++j) {
    const int c = lane + 32 * j;
    q[j] = c < p.d ? p.q[int64_t(row) * p.d + c] : 0.f;
    acc[j] = 0.f;
  }
  hd::OnlineSoftmax st;
  for (int64_t e = 0; e < p.m; ++e) {
    const float* k = p.keys + e * p.d;
    float s = 0.f;
    for (int j = 0; j < per; ++j) {
      const int c = lane + 32 * j;
      if (c < p.d) s += q[j] * k[c];
    }
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(kFullWarp, s, o);
    float rescale, pr;
    st.push(p.scale * s + (p.bias ? p.bias[e] : 0.f), rescale, pr);
    const float* v = p.values + e * p.d;
    for (int j = 0; j < per; ++j) {
      const int c = lane + 32 * j;
      acc[j] = acc[j] * rescale + (c < p.d ? pr * v[c] : 0.f);
    }
  }
  const float inv = st.inv_l();
  for (int j = 0; j < per; ++j) {
    const int c = lane + 32 * j;
    if (c < p.d) p.out[int64_t(row) * p.d + c] = acc[j] * inv;
  }
  if (lane == 0) p.lse[row] = st.lse();
}

__global__ void __launch_bounds__(kThreads) merge_state_kernel(MergeStateParams p) {
  const int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= int64_t(p.rows) * p.d) return;
  const int64_t r = e / p.d;
  float wa, wb;
  const float lse = hd::merge_weights(p.lse_a[r], p.lse_b[r], wa, wb);
  p.out[e] = wa * p.out_a[e] + wb * p.out_b[e];
  if (e % p.d == 0) p.lse[r] = lse;
}
}  // namespace

void biased_attention(const BiasedAttentionParams& p) {
  if (p.rows < 0 || p.m < 0 || p.d <= 0) throw std::runtime_error("opt::biased_attention: negative size or d <= 0");
  if (p.d > 32 * kMaxPerLane)
    throw std::runtime_error("opt::biased_attention: d " + std::to_string(p.d) + " above 256");
  if (p.rows == 0) return;
  KVSIM_LAUNCH(biased_attention_kernel, check::blocks_for(int64_t(p.rows) * 32, kThreads), kThreads)(p);
  check::check(cudaGetLastError(), "opt::biased_attention");
}

void merge_state(const MergeStateParams& p) {
  const int64_t total = int64_t(p.rows) * p.d;
  if (total <= 0) return;
  KVSIM_LAUNCH(merge_state_kernel, check::blocks_for(total, kThreads), kThreads)(p);
  check::check(cudaGetLastError(), "opt::merge_state");
}

}  // namespace kvsim::opt::KVSIM_CUDA_BACKEND
