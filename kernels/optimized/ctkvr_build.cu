// CTKVR's qcIVF build (kvsim::ref::qcivf_build) and its rerank of the recalled keys (ref::ctkvr_rerank)
// on the device, in the host's arithmetic so the lists and the ranking are bit-identical: the scores by
// exact_scores.cu (the reference's sequential dot), a softmax per row in the host's form (max, Σexp in
// double, times float(1/Σ)), the max over the GQA group, and the top ρ (ρ') by topk.cu — one block per
// centroid row, the exact rank words, instead of the reference twin's thrust sort of every row.
// Softmax: one thread per row; max: one thread per column (coalesced across a warp). Bound: the build is
// G·C·n·d·2 FLOPs of scores, compute-bound; the rerank m·d·4 bytes of gathered rows plus G·m·d·2 FLOPs.
#include <stdexcept>

#include "kernels/optimized/cuda.hpp"
#include "kernels/reference/cuda_common.cuh"

namespace kvsim::opt::KVSIM_CUDA_BACKEND {
namespace {
namespace check = ::kvsim::ref::KVSIM_CUDA_BACKEND::detail;
constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads) softmax_rows_kernel(float* S, int64_t m, int64_t n) {
  const int64_t r = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r >= m) return;
  float* row = S + r * n;
  float mx = -INFINITY;
  for (int64_t i = 0; i < n; ++i) mx = mx < row[i] ? row[i] : mx;
  if (!(mx > -INFINITY)) {
    for (int64_t i = 0; i < n; ++i) row[i] = 0.f;
    return;
  }
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += (row[i] = expf(row[i] - mx));
  const float inv = float(1.0 / s);
  for (int64_t i = 0; i < n; ++i) row[i] *= inv;
}

// out[i] = max over the m rows of S[:, i], from -inf, std::max's order.
__global__ void __launch_bounds__(kThreads) max_rows_kernel(const float* S, int64_t m, int64_t n, float* out) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float mx = -INFINITY;
  for (int64_t j = 0; j < m; ++j) mx = mx < S[j * n + i] ? S[j * n + i] : mx;
  out[i] = mx;
}

__global__ void __launch_bounds__(kThreads) gather_rows_kernel(const float* src, const int32_t* ids, int64_t m, int d,
                                                               float* dst) {
  const int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e < m * d) dst[e] = src[int64_t(ids[e / d]) * d + e % d];
}

__global__ void __launch_bounds__(kThreads) map_ids_kernel(const int32_t* recalled, const int32_t* pos, int64_t k,
                                                           int32_t* out) {
  const int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j < k) out[j] = recalled[pos[j]];
}

void softmax_then_max(float* S, int64_t rows, int64_t groups, int64_t n, float* A) {
  KVSIM_LAUNCH(softmax_rows_kernel, check::blocks_for(rows, kThreads), kThreads)(S, rows, n);
  check::check(cudaGetLastError(), "opt::ctkvr (softmax)");
  // rows = groups · (rows / groups): row (g, c) at g·(rows/groups)·n + c·n, so per column of the
  // [groups, (rows/groups)·n] view the max over groups is the host's max over the group.
  KVSIM_LAUNCH(max_rows_kernel, check::blocks_for(rows / groups * n, kThreads), kThreads)(S, groups, rows / groups * n, A);
  check::check(cudaGetLastError(), "opt::ctkvr (max over the group)");
}
}  // namespace

int qcivf_build(const QcivfBuildParams& p) {
  const int rp = int(p.rho < 0 ? 0 : (p.rho > p.n ? p.n : p.rho));
  if (rp == 0 || p.C <= 0 || p.groups <= 0) return rp;
  if (!p.scores || !p.max_scores) throw std::runtime_error("opt::qcivf_build: score scratch missing");
  for (int g = 0; g < p.groups; ++g) {
    ExactScoreParams s;
    s.Q = p.centroids + int64_t(g) * p.C * p.d, s.m = p.C, s.M = p.keys, s.n = p.n, s.d = p.d, s.scale = p.scale;
    s.S = p.scores + int64_t(g) * p.C * p.n;
    exact_scores(s);
  }
  softmax_then_max(p.scores, int64_t(p.groups) * p.C, p.groups, p.n, p.max_scores);
  TopkParams t;
  t.scores = p.max_scores, t.out = p.ivf, t.rows = p.C, t.n = p.n, t.k = rp, t.rank_order = true;
  t.workspace = p.workspace;
  topk(t);
  return rp;
}

int64_t ctkvr_rerank(const RerankParams& p) {
  const int64_t kk = p.rho_prime < 0 ? 0 : (p.rho_prime > p.m ? p.m : p.rho_prime);
  if (kk == 0 || p.groups <= 0) return kk;
  if (!p.rows || !p.scores || !p.max_scores || !p.positions) throw std::runtime_error("opt::ctkvr_rerank: scratch missing");
  KVSIM_LAUNCH(gather_rows_kernel, check::blocks_for(p.m * p.d, kThreads), kThreads)(p.keys, p.recalled, p.m, p.d, p.rows);
  check::check(cudaGetLastError(), "opt::ctkvr_rerank (gather)");
  ExactScoreParams s;
  s.Q = p.q, s.m = p.groups, s.M = p.rows, s.n = p.m, s.d = p.d, s.scale = p.scale, s.S = p.scores;
  exact_scores(s);
  softmax_then_max(p.scores, p.groups, p.groups, p.m, p.max_scores);
  TopkParams t;
  t.scores = p.max_scores, t.out = p.positions, t.rows = 1, t.n = p.m, t.k = kk, t.rank_order = true;
  t.workspace = p.workspace;
  topk(t);
  KVSIM_LAUNCH(map_ids_kernel, check::blocks_for(kk, kThreads), kThreads)(p.recalled, p.positions, kk, p.out);
  check::check(cudaGetLastError(), "opt::ctkvr_rerank (ids)");
  return kk;
}

}  // namespace kvsim::opt::KVSIM_CUDA_BACKEND
