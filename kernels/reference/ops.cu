// Simple CUDA versions of the non-attention reference kernels (see cuda.hpp): one thread per output
// element, thrust for sorting. Per-element math from hd.hpp, shared with the host reference.
#include <thrust/execution_policy.h>
#include <thrust/sequence.h>
#include <thrust/sort.h>
#include <thrust/unique.h>

#include <algorithm>
#include <cmath>

#include "kernels/reference/cuda.hpp"
#include "kernels/reference/cuda_common.cuh"
#include "kernels/reference/hd.hpp"

namespace kvsim::ref::KVSIM_CUDA_BACKEND {
namespace {
constexpr int kThreads = 256;

__global__ void merge_kernel(const float* o_a, const float* lse_a, const float* o_b, const float* lse_b, int rows, int d,
                             float* out, float* lse_out) {
  const int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= int64_t(rows) * d) return;
  const int64_t r = e / d;
  float wa, wb;
  const float lse = hd::merge_weights(lse_a[r], lse_b[r], wa, wb);
  out[e] = wa * o_a[e] + wb * o_b[e];  // each element reads only its own inputs, so out may alias o_a
  if (e % d == 0) lse_out[r] = lse;
}

__global__ void score_kernel(const float* Q, int64_t m, const float* M, int64_t n, int d, float* S, bool cosine,
                             float scale) {
  const int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= m * n) return;
  const float* q = Q + (e / n) * d;
  const float* r = M + (e % n) * d;
  if (!cosine) {
    S[e] = scale * hd::dot(q, r, d);
    return;
  }
  const float den = sqrtf(hd::dot(q, q, d)) * sqrtf(hd::dot(r, r, d));
  S[e] = den > 0.f ? hd::dot(q, r, d) / den : 0.f;
}

__global__ void sekv_route_kernel(const float* q_proj, const float* summaries, int64_t m, int d_proj,
                                  const int32_t* span_len, float inv_sqrt, float* alpha) {
  const int64_t s = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (s >= m) return;
  alpha[s] = hd::sekv_route(hd::dot(q_proj, summaries + s * d_proj, d_proj), inv_sqrt, span_len[s]);
}

struct RankOrder {
  const float* s;
  __host__ __device__ bool operator()(int32_t a, int32_t b) const { return hd::ranks_before(s[a], a, s[b], b); }
};

template <class T>
__global__ void gather_kernel(const T* src, int64_t row_elems, const int32_t* idx, int64_t m, T* dst) {
  const int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= m * row_elems) return;
  dst[e] = src[int64_t(idx[e / row_elems]) * row_elems + e % row_elems];
}

__global__ void reconstruct_kernel(const float* us, const float* vt, int64_t n, int r, int d, float* out) {
  const int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= n * d) return;
  const int64_t i = e / d;
  const int c = int(e % d);
  float s = 0.f;
  for (int j = 0; j < r; ++j) s += us[i * r + j] * vt[int64_t(j) * d + c];
  out[e] = s;
}

__global__ void quest_kernel(const float* q, const float* kmin, const float* kmax, int64_t P, int d, float* bound) {
  const int64_t p = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (p >= P) return;
  float s = 0.f;
  for (int c = 0; c < d; ++c) s += hd::quest_channel_bound(q[c], kmin[p * d + c], kmax[p * d + c]);
  bound[p] = s;
}
}  // namespace

void* device_alloc(size_t bytes) {
  void* p = nullptr;
  detail::check(cudaMalloc(&p, bytes), "cudaMalloc");
  return p;
}
void device_free(void* p) {
  if (p) cudaFree(p);
}
void copy_to_device(void* dst, const void* src, size_t bytes) {
  detail::check(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "copy_to_device");
}
void copy_to_host(void* dst, const void* src, size_t bytes) {
  detail::check(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), "copy_to_host");
}

void merge_state(const float* o_a, const float* lse_a, const float* o_b, const float* lse_b, int rows, int d,
                 float* out, float* lse_out) {
  const int64_t total = int64_t(rows) * d;
  if (total <= 0) return;
  KVSIM_LAUNCH(merge_kernel, detail::blocks_for(total, kThreads), kThreads)(o_a, lse_a, o_b, lse_b, rows, d, out,
                                                                           lse_out);
  detail::check_launch("merge_state");
}

void score_gemm(const float* Q, int64_t m, const float* M, int64_t n, int d, float* S, bool cosine, float scale) {
  if (m * n <= 0) return;
  KVSIM_LAUNCH(score_kernel, detail::blocks_for(m * n, kThreads), kThreads)(Q, m, M, n, d, S, cosine, scale);
  detail::check_launch("score_gemm");
}

void sekv_routing_scores(const float* q_proj, const float* summaries, int64_t m, int d_proj, const int32_t* span_len,
                         float* alpha) {
  if (m <= 0) return;
  const float inv_sqrt = 1.f / std::sqrt(float(d_proj));  // computed on the host, as the host version does
  KVSIM_LAUNCH(sekv_route_kernel, detail::blocks_for(m, kThreads), kThreads)(q_proj, summaries, m, d_proj, span_len,
                                                                            inv_sqrt, alpha);
  detail::check_launch("sekv_routing_scores");
}

int64_t topk_rows(const float* scores, int rows, int64_t n, int64_t k, int32_t* out) {
  const int64_t kk = std::clamp<int64_t>(k, 0, n);
  if (kk == 0 || rows <= 0) return kk;
  int32_t* idx = static_cast<int32_t*>(device_alloc(size_t(n) * sizeof(int32_t)));
  try {
    for (int r = 0; r < rows; ++r) {
      thrust::sequence(thrust::device, idx, idx + n);
      thrust::sort(thrust::device, idx, idx + n, RankOrder{scores + int64_t(r) * n});  // a total order: ties by index
      detail::check(cudaMemcpy(out + int64_t(r) * kk, idx, size_t(kk) * sizeof(int32_t), cudaMemcpyDeviceToDevice),
                    "topk_rows copy");
    }
    detail::check_launch("topk_rows");
  } catch (...) {
    device_free(idx);
    throw;
  }
  device_free(idx);
  return kk;
}

int64_t dedup_inplace(int32_t* ids, int64_t n) {
  if (n <= 0) return 0;
  thrust::sort(thrust::device, ids, ids + n);
  const int64_t m = thrust::unique(thrust::device, ids, ids + n) - ids;
  detail::check_launch("dedup_inplace");
  return m;
}

namespace {
template <class T>
void gather_rows_impl(const T* src, int64_t row_elems, const int32_t* idx, int64_t m, T* dst) {
  if (m * row_elems <= 0) return;
  KVSIM_LAUNCH(gather_kernel, detail::blocks_for(m * row_elems, kThreads), kThreads)(src, row_elems, idx, m, dst);
  detail::check_launch("gather_rows");
}
}  // namespace

void gather_rows(const float* src, int64_t row_elems, const int32_t* idx, int64_t m, float* dst) {
  gather_rows_impl(src, row_elems, idx, m, dst);
}
void gather_rows(const int32_t* src, int64_t row_elems, const int32_t* idx, int64_t m, int32_t* dst) {
  gather_rows_impl(src, row_elems, idx, m, dst);
}

void lowrank_reconstruct(const float* us, const float* vt, int64_t n, int r, int d, float* out) {
  if (n * d <= 0) return;
  KVSIM_LAUNCH(reconstruct_kernel, detail::blocks_for(n * d, kThreads), kThreads)(us, vt, n, r, d, out);
  detail::check_launch("lowrank_reconstruct");
}

void quest_page_bound(const float* q, const float* kmin, const float* kmax, int64_t num_pages, int d, float* bound) {
  if (num_pages <= 0) return;
  KVSIM_LAUNCH(quest_kernel, detail::blocks_for(num_pages, kThreads), kThreads)(q, kmin, kmax, num_pages, d, bound);
  detail::check_launch("quest_page_bound");
}

}  // namespace kvsim::ref::KVSIM_CUDA_BACKEND
