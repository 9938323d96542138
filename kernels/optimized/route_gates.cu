// SEKV's routing as a deployment runs it (policies/sekv/cost.cpp, phase `route`; seed 003 eq. 3-5): every
// query head's gate over every span summary of a layer, in ONE launch. The replay keeps sekv.cu's
// routing, which repeats the host's double-precision arithmetic thread by thread (one thread per span
// reading its summary alone: 13% of the fetched sectors used, and a launch pair per query head); this
// one is what the phase costs on a GPU.
//
// A block of 8 warps serves one head (grid.y) and 8 tiles of 32 spans (grid.x). It first projects its
// head's query, q' = q·W (d × d_proj, W's rows as coalesced float4s; each block recomputes it: W is read
// from L2 after the first block, 16 KiB at d = 128, d_proj = 32). A warp then reads its tile of 32 summaries as
// float4s, 32 consecutive ones per instruction (512 contiguous bytes: every sector whole); the
// d_proj / 4 lanes that hold one summary's float4s dot them with the same four components of q' and
// reduce by shuffles, and the tile's 32 gates leave as one coalesced row (staged in shared memory).
// Bound: the summaries once, the gates written, q and W once per head: HBM. FLOPs: 2·d_proj per span
// and head plus 2·d·d_proj per block.
#include <cmath>
#include <stdexcept>
#include <string>

#include "kernels/optimized/cuda.hpp"
#include "kernels/reference/cuda_common.cuh"
#include "kernels/reference/hd.hpp"

namespace kvsim::opt::KVSIM_CUDA_BACKEND {
namespace {
namespace check = ::kvsim::ref::KVSIM_CUDA_BACKEND::detail;
namespace hd = ::kvsim::ref::hd;
constexpr int kThreads = 256, kWarps = kThreads / 32, kTile = 32;
constexpr int kMaxDim = 256, kMaxProj = 128;
constexpr unsigned kFullWarp = 0xffffffffu;

__global__ void __launch_bounds__(kThreads) route_gates_kernel(RouteGatesParams p, float inv_sqrt) {
  __shared__ float qs[kMaxDim];
  __shared__ float4 part[kWarps][kMaxProj / 4];
  __shared__ float qp[kMaxProj];
  __shared__ float staged[kWarps][kTile];
  const int h = blockIdx.y, set = h / p.group, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  // q' = q·W: q staged once; thread (j4, k) takes float4 j4 of W's rows k, k + parts, ... (coalesced
  // 16-byte loads, d / parts of them: 4 at d = 128, d_proj = 32), the warp's rows are summed by shuffles
  // (lanes with the same j4 are lane ^ quads·m), then the warps' partials in shared memory.
  if (tid < p.d) qs[tid] = p.q[int64_t(h) * p.d + tid];
  __syncthreads();
  const int quads = p.d_proj / 4, parts = kThreads / quads, j4 = tid % quads, k = tid / quads;
  const float4* const W = reinterpret_cast<const float4*>(p.W + int64_t(set) * p.d * p.d_proj);
  float4 a = make_float4(0.f, 0.f, 0.f, 0.f);
  for (int c = k; c < p.d; c += parts) {
    const float x = qs[c];
    const float4 w = W[int64_t(c) * quads + j4];
    a.x = fmaf(x, w.x, a.x), a.y = fmaf(x, w.y, a.y), a.z = fmaf(x, w.z, a.z), a.w = fmaf(x, w.w, a.w);
  }
  for (int off = quads; off < 32; off <<= 1) {
    a.x += __shfl_xor_sync(kFullWarp, a.x, off), a.y += __shfl_xor_sync(kFullWarp, a.y, off);
    a.z += __shfl_xor_sync(kFullWarp, a.z, off), a.w += __shfl_xor_sync(kFullWarp, a.w, off);
  }
  if (lane < quads) part[warp][lane] = a;
  __syncthreads();
  if (tid < p.d_proj) {
    float sum = 0.f;
    for (int w = 0; w < kWarps; ++w) {
      const float4 v = part[w][tid / 4];
      sum += (tid & 3) == 0 ? v.x : (tid & 3) == 1 ? v.y : (tid & 3) == 2 ? v.z : v.w;
    }
    qp[tid] = sum;
  }
  __syncthreads();
  // Lane l holds float4 number l % lanes of each summary it reads: always the same four components of q'.
  const int lanes = p.d_proj / 4, spans_per_load = kTile / lanes;
  const float4 qv = make_float4(qp[4 * (lane % lanes)], qp[4 * (lane % lanes) + 1], qp[4 * (lane % lanes) + 2],
                                qp[4 * (lane % lanes) + 3]);
  const float* const S = p.summaries + int64_t(set) * p.spans * p.d_proj;
  float* const gates = p.gates + int64_t(h) * p.spans;
  for (int64_t tile = (int64_t(blockIdx.x) * kWarps + warp) * kTile; tile < p.spans;
       tile += int64_t(gridDim.x) * kWarps * kTile) {
    const int valid = p.spans - tile < kTile ? int(p.spans - tile) : kTile;
    const float4* const src = reinterpret_cast<const float4*>(S + tile * p.d_proj);
    for (int i = 0; i < lanes; ++i) {
      const int span = i * spans_per_load + lane / lanes;  // (i * 32 + lane) / lanes
      float dot = 0.f;
      if (span < valid) {
        const float4 v = src[i * 32 + lane];
        dot = v.x * qv.x + v.y * qv.y + v.z * qv.z + v.w * qv.w;
      }
      for (int off = lanes / 2; off > 0; off >>= 1) dot += __shfl_xor_sync(kFullWarp, dot, off);
      if (lane % lanes == 0) staged[warp][span] = dot;
    }
    __syncwarp();
    if (lane < valid) gates[tile + lane] = hd::sekv_route(staged[warp][lane], inv_sqrt, p.span_len[tile + lane]);
    __syncwarp();
  }
}
}  // namespace

void route_gates(const RouteGatesParams& p) {
  const auto fail = [](const std::string& why) { throw std::runtime_error("opt::route_gates: " + why); };
  if (p.heads < 0 || p.spans < 0) fail("heads " + std::to_string(p.heads) + ", spans " + std::to_string(p.spans));
  if (p.d < 1 || p.d > kMaxDim) fail("d " + std::to_string(p.d) + " outside [1, 256]");
  if (p.d_proj < 4 || p.d_proj > kMaxProj || (p.d_proj & (p.d_proj - 1)))
    fail("d_proj " + std::to_string(p.d_proj) + " is not a power of two in [4, 128]");
  if (p.group < 1 || p.heads % p.group) fail("group " + std::to_string(p.group) + " does not divide the heads");
  if (p.heads == 0 || p.spans == 0) return;
  if (!p.q || !p.W || !p.summaries || !p.span_len || !p.gates) fail("a buffer is missing");
  if (reinterpret_cast<uintptr_t>(p.summaries) % 16 || reinterpret_cast<uintptr_t>(p.W) % 16)
    fail("summaries and W must be 16-byte aligned");
  const int64_t tiles = (p.spans + kTile - 1) / kTile;
  const dim3 grid(unsigned((tiles + kWarps - 1) / kWarps), unsigned(p.heads));
  KVSIM_LAUNCH(route_gates_kernel, grid, kThreads)(p, 1.f / std::sqrt(float(p.d_proj)));
  check::check(cudaGetLastError(), "opt::route_gates");
}

}  // namespace kvsim::opt::KVSIM_CUDA_BACKEND
