// Simple CUDA versions of the prefill builders (segment / surprisal-weighted means), the staging gather
// of contiguous runs, and CTKVR's IVF build, recall and rerank (see cuda.hpp). One thread per output element;
// CTKVR is composed from the launchers in ops.cu the way ivf.cpp composes the host kernels, so the two
// are the same algorithm step by step.
#include <thrust/device_ptr.h>
#include <thrust/execution_policy.h>
#include <thrust/scan.h>

#include <algorithm>
#include <vector>

#include "kernels/reference/cuda.hpp"
#include "kernels/reference/cuda_common.cuh"
#include "kernels/reference/hd.hpp"

namespace kvsim::ref::KVSIM_CUDA_BACKEND {
namespace {
constexpr int kThreads = 256;

__global__ void segment_mean_kernel(const float* X, const float* w, int64_t n, int d, const int32_t* starts, int64_t S,
                                    float* out) {
  const int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= S * d) return;
  const int64_t s = e / d;
  const int c = int(e % d);
  const int64_t b = starts[s], end = s + 1 < S ? starts[s + 1] : n;
  double wsum = 0;
  if (w)
    for (int64_t t = b; t < end; ++t) wsum += w[t];
  float acc = 0.f;
  if (w && wsum != 0) {
    for (int64_t t = b; t < end; ++t) acc += w[t] * X[t * d + c];
    out[e] = float(acc / wsum);
  } else {
    for (int64_t t = b; t < end; ++t) acc += X[t * d + c];
    out[e] = acc / float(end - b);
  }
}

// One block per run; dst_row[r] is the exclusive prefix sum of the lengths.
__global__ void gather_runs_kernel(const float* src, int64_t row_elems, const int32_t* starts, const int32_t* lens,
                                   const int64_t* dst_row, float* dst) {
  const int64_t r = blockIdx.x;
  const int64_t count = int64_t(lens[r]) * row_elems;
  const float* from = src + int64_t(starts[r]) * row_elems;
  float* to = dst + dst_row[r] * row_elems;
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x) to[i] = from[i];
}

__global__ void softmax_rows_kernel(float* S, int64_t m, int64_t n) {
  const int64_t r = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r >= m) return;
  float* row = S + r * n;
  float mx = -INFINITY;
  for (int64_t j = 0; j < n; ++j) mx = row[j] > mx ? row[j] : mx;
  float sum = 0.f;
  for (int64_t j = 0; j < n; ++j) sum += (row[j] = expf(row[j] - mx));
  for (int64_t j = 0; j < n; ++j) row[j] /= sum;
}

__global__ void reduce_max_rows_kernel(const float* S, int64_t m, int64_t n, float* out) {
  const int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= n) return;
  float mx = -INFINITY;
  for (int64_t r = 0; r < m; ++r) mx = S[r * n + j] > mx ? S[r * n + j] : mx;
  out[j] = mx;
}
}  // namespace

void segment_weighted_mean(const float* X, const float* w, int64_t n, int d, const int32_t* starts, int64_t S,
                           float* out) {
  if (S * d <= 0) return;
  KVSIM_LAUNCH(segment_mean_kernel, detail::blocks_for(S * d, kThreads), kThreads)(X, w, n, d, starts, S, out);
  detail::check_launch("segment_weighted_mean");
}

int64_t gather_runs(const float* src, int64_t row_elems, const int32_t* starts, const int32_t* lens, int64_t runs,
                    float* dst) {
  if (runs <= 0) return 0;
  DeviceBuffer<int64_t> dst_row(size_t(runs) + 1);
  detail::check(cudaMemset(dst_row.get(), 0, sizeof(int64_t)), "gather_runs memset");
  thrust::inclusive_scan(thrust::device, lens, lens + runs, dst_row.get() + 1);  // int32 lengths summed in int64
  KVSIM_LAUNCH(gather_runs_kernel, unsigned(runs), kThreads)(src, row_elems, starts, lens, dst_row.get(), dst);
  detail::check_launch("gather_runs");
  int64_t total = 0;
  copy_to_host(&total, dst_row.get() + runs, sizeof total);
  return total;
}

void softmax_rows(float* S, int64_t m, int64_t n) {
  if (m <= 0 || n <= 0) return;
  KVSIM_LAUNCH(softmax_rows_kernel, detail::blocks_for(m, kThreads), kThreads)(S, m, n);
  detail::check_launch("softmax_rows");
}

void reduce_max_rows(const float* S, int64_t m, int64_t n, float* out) {
  if (n <= 0) return;
  KVSIM_LAUNCH(reduce_max_rows_kernel, detail::blocks_for(n, kThreads), kThreads)(S, m, n, out);
  detail::check_launch("reduce_max_rows");
}

int qcivf_build(const float* centroids, int G, int C, const float* K, int64_t n, int d, float scale, int rho,
                int32_t* ivf) {
  const int rp = int(std::clamp<int64_t>(rho, 0, n));
  if (rp == 0 || C <= 0 || G <= 0) return rp;
  // A[g, c, :] = softmax over the keys of scale·(centroid_{g,c}·k); then the max over g, per centroid.
  DeviceBuffer<float> A(size_t(G) * C * n), Akv(size_t(C) * n);
  for (int g = 0; g < G; ++g)
    score_gemm(centroids + int64_t(g) * C * d, C, K, n, d, A.get() + int64_t(g) * C * n, false, scale);
  softmax_rows(A.get(), int64_t(G) * C, n);
  reduce_max_rows(A.get(), G, int64_t(C) * n, Akv.get());
  topk_rows(Akv.get(), C, n, rp, ivf);
  return rp;
}

int64_t ctkvr_recall(const float* q, int G, const float* centroids, int C, int d, const int32_t* ivf, int rho,
                     int c_prime, int32_t* out, int32_t* chosen) {
  const int64_t cp = std::clamp<int64_t>(c_prime, 0, C);
  if (cp == 0 || G <= 0 || rho <= 0) return 0;
  // Cos_q[g, c] = cos(q_g, centroid_{g,c}); Cos_kv = max over the group; the top C' centroids.
  DeviceBuffer<float> S(size_t(G) * C), cos_kv(static_cast<size_t>(C));
  DeviceBuffer<int32_t> top(static_cast<size_t>(cp));
  for (int g = 0; g < G; ++g)
    score_gemm(q + int64_t(g) * d, 1, centroids + int64_t(g) * C * d, C, d, S.get() + int64_t(g) * C, true);
  reduce_max_rows(S.get(), G, C, cos_kv.get());
  topk_rows(cos_kv.get(), 1, C, cp, top.get());
  if (chosen)
    detail::check(cudaMemcpy(chosen, top.get(), size_t(cp) * sizeof(int32_t), cudaMemcpyDeviceToDevice),
                  "ctkvr_recall chosen");
  // Their IVF lists back to back, then sorted and unique.
  gather_rows(ivf, rho, top.get(), cp, out);
  return dedup_inplace(out, cp * rho);
}

int64_t ctkvr_rerank(const float* Q, int G, const float* K, int d, const int32_t* recalled, int64_t m, float scale,
                     int64_t rho_prime, int32_t* out) {
  const int64_t kk = std::clamp<int64_t>(rho_prime, 0, m);
  if (kk == 0 || G <= 0) return kk;
  DeviceBuffer<float> rows(size_t(m) * d), S(size_t(G) * m), A(static_cast<size_t>(m));
  DeviceBuffer<int32_t> pos(static_cast<size_t>(kk));
  gather_rows(K, d, recalled, m, rows.get());
  score_gemm(Q, G, rows.get(), m, d, S.get(), false, scale);
  softmax_rows(S.get(), G, m);
  reduce_max_rows(S.get(), G, m, A.get());
  topk_rows(A.get(), 1, m, kk, pos.get());
  gather_rows(recalled, 1, pos.get(), kk, out);  // positions in the recalled list -> key ids
  return kk;
}

}  // namespace kvsim::ref::KVSIM_CUDA_BACKEND
