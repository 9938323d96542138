// Simple CUDA attention kernels (see cuda.hpp): one thread block per query row, three obviously-correct
// steps sharing hd.hpp's math with the host reference:
//   1. every thread takes logits s_i = scale·q·k_i + bias_i of a strided share of the entries; block max m;
//   2. tiles of blockDim entries: each thread writes p = exp(s - m) of one entry to shared memory, then
//      each thread accumulates its channels Σ p·v[c] over the tile; l = Σ p (block sum);
//   3. out = acc / l, lse = m + log l (empty or all -inf: out 0, lse -inf).
// Logits are computed twice (steps 1 and 2) instead of being stored: no scratch, nothing to size.
#include <cmath>

#include "kernels/reference/cuda.hpp"
#include "kernels/reference/cuda_common.cuh"
#include "kernels/reference/hd.hpp"

namespace kvsim::ref::KVSIM_CUDA_BACKEND {
namespace {
constexpr int kThreads = 128;
constexpr int kMaxChan = 4;  // channels per thread: d <= kThreads · kMaxChan = 512

// Entry sources: count(row), key(row, i), value(row, i), bias(row, i).
struct DenseSrc {
  const float *K, *V;
  int64_t n;
  int d;
  __device__ int64_t count(int) const { return n; }
  __device__ const float* key(int, int64_t i) const { return K + i * d; }
  __device__ const float* value(int, int64_t i) const { return V + i * d; }
  __device__ float bias(int, int64_t) const { return 0.f; }
};
struct GatherSrc {
  const float *K, *V;
  const int32_t* idx;
  int64_t m;
  int d;
  __device__ int64_t count(int) const { return m; }
  __device__ const float* key(int, int64_t i) const { return K + int64_t(idx[i]) * d; }
  __device__ const float* value(int, int64_t i) const { return V + int64_t(idx[i]) * d; }
  __device__ float bias(int, int64_t) const { return 0.f; }
};
struct BiasedSrc {
  const float *K, *V, *b;
  int64_t m;
  int d;
  __device__ int64_t count(int) const { return m; }
  __device__ const float* key(int, int64_t i) const { return K + i * d; }
  __device__ const float* value(int, int64_t i) const { return V + i * d; }
  __device__ float bias(int, int64_t i) const { return b[i]; }
};
// Row = b · num_qo_heads + h; token i of request b is slot i % page_size of its (i / page_size)-th page.
struct PagedSrc {
  const float *kp, *vp;
  const int32_t *indptr, *indices, *last;
  int page_size, num_kv_heads, head_dim, num_qo_heads;
  __device__ int64_t count(int row) const {
    const int b = row / num_qo_heads;
    const int np = indptr[b + 1] - indptr[b];
    return np > 0 ? int64_t(np - 1) * page_size + last[b] : 0;
  }
  __device__ int64_t offset(int row, int64_t i) const {
    const int b = row / num_qo_heads, h = row % num_qo_heads;
    const int kvh = h / (num_qo_heads / num_kv_heads);
    const int64_t page = indices[indptr[b] + i / page_size];
    return ((page * page_size + i % page_size) * num_kv_heads + kvh) * int64_t(head_dim);
  }
  __device__ const float* key(int row, int64_t i) const { return kp + offset(row, i); }
  __device__ const float* value(int row, int64_t i) const { return vp + offset(row, i); }
  __device__ float bias(int, int64_t) const { return 0.f; }
};

__device__ float block_reduce(float x, bool is_max, float* red) {
  red[threadIdx.x] = x;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (int(threadIdx.x) < s)
      red[threadIdx.x] = is_max ? fmaxf(red[threadIdx.x], red[threadIdx.x + s]) : red[threadIdx.x] + red[threadIdx.x + s];
    __syncthreads();
  }
  const float r = red[0];
  __syncthreads();
  return r;
}

template <class Src>
__global__ void attend_kernel(Src src, const float* Q, int d, float scale, float* out, float* lse) {
  __shared__ float red[kThreads];
  __shared__ float p[kThreads];
  const int row = blockIdx.x;
  const float* q = Q + int64_t(row) * d;
  const int64_t cnt = src.count(row);
  // 1. block max of the logits
  float m = -INFINITY;
  for (int64_t i = threadIdx.x; i < cnt; i += blockDim.x)
    m = fmaxf(m, scale * hd::dot(q, src.key(row, i), d) + src.bias(row, i));
  m = block_reduce(m, true, red);
  float acc[kMaxChan] = {0.f, 0.f, 0.f, 0.f};
  float l = 0.f;
  if (m > -INFINITY) {
    // 2. tiles: probabilities to shared memory, then per-channel accumulation
    for (int64_t base = 0; base < cnt; base += blockDim.x) {
      const int64_t i = base + threadIdx.x;
      float pi = 0.f;
      if (i < cnt) pi = expf(scale * hd::dot(q, src.key(row, i), d) + src.bias(row, i) - m);
      p[threadIdx.x] = pi;
      l += pi;
      __syncthreads();
      const int64_t rest = cnt - base;
      const int64_t tile = rest < int64_t(blockDim.x) ? rest : int64_t(blockDim.x);
      for (int j = 0; j < kMaxChan; ++j) {
        const int c = threadIdx.x + j * blockDim.x;
        if (c >= d) break;
        for (int64_t t = 0; t < tile; ++t) acc[j] += p[t] * src.value(row, base + t)[c];
      }
      __syncthreads();
    }
  }
  l = block_reduce(l, false, red);
  // 3. normalize
  const float inv = l > 0.f ? 1.f / l : 0.f;
  for (int j = 0; j < kMaxChan; ++j) {
    const int c = threadIdx.x + j * blockDim.x;
    if (c < d) out[int64_t(row) * d + c] = acc[j] * inv;
  }
  if (threadIdx.x == 0) lse[row] = l > 0.f ? m + logf(l) : -INFINITY;
}

template <class Src>
void launch(const Src& src, int rows, const float* Q, int d, float scale, float* out, float* lse, const char* what) {
  if (d > kThreads * kMaxChan) throw std::runtime_error(std::string(what) + ": head_dim above 512");
  if (rows <= 0) return;
  KVSIM_LAUNCH(attend_kernel, rows, kThreads)(src, Q, d, scale, out, lse);
  detail::check_launch(what);
}
}  // namespace

void decode_attention(const float* Q, int rows, const float* K, const float* V, int64_t n, int d, float scale,
                      float* out, float* lse) {
  launch(DenseSrc{K, V, n, d}, rows, Q, d, scale, out, lse, "decode_attention");
}

void gather_attention(const float* Q, int rows, const float* K, const float* V, const int32_t* idx, int64_t m, int d,
                      float scale, float* out, float* lse) {
  launch(GatherSrc{K, V, idx, m, d}, rows, Q, d, scale, out, lse, "gather_attention");
}

void biased_attention(const float* Q, int rows, const float* K, const float* V, const float* bias, int64_t m, int d,
                      float scale, float* out, float* lse) {
  launch(BiasedSrc{K, V, bias, m, d}, rows, Q, d, scale, out, lse, "biased_attention");
}

void paged_decode_attention(const float* q, int batch, int num_qo_heads, const float* k_pages, const float* v_pages,
                            int page_size, int num_kv_heads, int head_dim, const int32_t* indptr,
                            const int32_t* indices, const int32_t* last_page_len, float scale, float* out,
                            float* lse) {
  if (num_kv_heads <= 0 || num_qo_heads % num_kv_heads != 0)
    throw std::runtime_error("paged_decode_attention: num_qo_heads not a multiple of num_kv_heads");
  launch(PagedSrc{k_pages, v_pages, indptr, indices, last_page_len, page_size, num_kv_heads, head_dim, num_qo_heads},
         batch * num_qo_heads, q, head_dim, scale, out, lse, "paged_decode_attention");
}

}  // namespace kvsim::ref::KVSIM_CUDA_BACKEND
