// SEKV's reconstruction (policies/sekv/cost.cpp, phase `reconstruct`; seed 003 §3.3): every zoomed span's
// keys and values back at full resolution from the low-rank factors fetch_factors brought over, one
// launch for every span, KV head and matrix of a step's layer. A block of the factorization is
// X[n, d] ≈ us[n, r] · vt[r, d] (us = U·Σ, span_svd.cu's outputs); one CUDA block per low-rank block
// stages a tile of us rows and a chunk of vt's rows in shared memory and writes its tile of X, each
// thread kAcc of the tile's elements. Every global access is a contiguous run (us rows, vt rows, X rows):
// coalesced. Bound: the factors read once (r·(n + d)·4 bytes per block; vt re-read per row tile from L1/L2)
// and X written once (n·d·4), 2·n·r·d FLOPs: HBM-bound at SEKV's ranks (r <= 32: 16 FLOPs per byte
// written at most, under any GPU's ridge).
#include <stdexcept>
#include <string>

#include "kernels/optimized/cuda.hpp"
#include "kernels/reference/cuda_common.cuh"

namespace kvsim::opt::KVSIM_CUDA_BACKEND {
namespace {
namespace check = ::kvsim::ref::KVSIM_CUDA_BACKEND::detail;
constexpr int kThreads = 256;
constexpr int kMaxDim = 256;
constexpr int kRankChunk = 32;                          // vt rows staged at a time (32 KiB at d = 256)
constexpr int kTileRows = 32;                           // rows of X per tile
constexpr int kAcc = kTileRows * kMaxDim / kThreads;    // elements of a tile per thread, at most

__global__ void __launch_bounds__(kThreads) reconstruct_kernel(ReconstructParams p) {
  __shared__ float vt_s[kRankChunk * kMaxDim];
  __shared__ float us_s[kTileRows * kRankChunk];
  const int b = blockIdx.x, d = p.d, tid = threadIdx.x;
  const int n = p.rows[b], r = p.rank[b];
  const float* const us = p.factors + p.factor_offset[b];
  const float* const vt = us + int64_t(n) * r;
  float* const out = p.out + p.out_row[b] * d;
  for (int t0 = 0; t0 < n; t0 += kTileRows) {
    const int tr = n - t0 < kTileRows ? n - t0 : kTileRows, elems = tr * d;
    float acc[kAcc];
    KVSIM_UNROLL for (int i = 0; i < kAcc; ++i) acc[i] = 0.f;
    for (int j0 = 0; j0 < r; j0 += kRankChunk) {
      const int rc = r - j0 < kRankChunk ? r - j0 : kRankChunk;
      __syncthreads();  // the previous chunk's reads are done
      for (int e = tid; e < rc * d; e += kThreads) vt_s[e] = vt[int64_t(j0) * d + e];
      for (int e = tid; e < tr * rc; e += kThreads) {
        const int t = e / rc, j = e % rc;
        us_s[t * kRankChunk + j] = us[int64_t(t0 + t) * r + j0 + j];
      }
      __syncthreads();
      KVSIM_UNROLL for (int i = 0; i < kAcc; ++i) {
        const int e = tid + i * kThreads;
        if (e < elems) {
          const int t = e / d, c = e % d;
          float a = acc[i];
          for (int j = 0; j < rc; ++j) a = fmaf(us_s[t * kRankChunk + j], vt_s[j * d + c], a);
          acc[i] = a;
        }
      }
    }
    KVSIM_UNROLL for (int i = 0; i < kAcc; ++i) {
      const int e = tid + i * kThreads;
      if (e < elems) out[int64_t(t0) * d + e] = acc[i];
    }
  }
}
}  // namespace

void sekv_reconstruct(const ReconstructParams& p) {
  const auto fail = [](const std::string& why) { throw std::runtime_error("opt::sekv_reconstruct: " + why); };
  if (p.blocks < 0) fail("blocks " + std::to_string(p.blocks) + " < 0");
  if (p.d < 1 || p.d > kMaxDim) fail("d " + std::to_string(p.d) + " outside [1, 256]");
  if (p.blocks == 0) return;
  if (!p.factors || !p.factor_offset || !p.rows || !p.rank || !p.out_row || !p.out) fail("a buffer is missing");
  KVSIM_LAUNCH(reconstruct_kernel, unsigned(p.blocks), kThreads)(p);
  check::check(cudaGetLastError(), "opt::sekv_reconstruct");
}

}  // namespace kvsim::opt::KVSIM_CUDA_BACKEND
