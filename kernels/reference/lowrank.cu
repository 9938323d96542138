// A simple CUDA SVD for the low-rank builders (see cuda.hpp; host twin truncated_svd in lowrank.cpp,
// which uses Eigen's BDCSVD): one-sided Jacobi (Hestenes), one thread block per matrix, in double.
// Pairs of columns of A are rotated until all are mutually orthogonal; then A = U·Σ and the
// accumulated rotations are V, so X = (U·Σ)·Vᵀ. Slow (every pair in turn, a block reduction each) and
// obviously correct: singular values are the column norms, sorted descending at the end.
#include <stdexcept>

#include "kernels/reference/cuda.hpp"
#include "kernels/reference/cuda_common.cuh"

namespace kvsim::ref::KVSIM_CUDA_BACKEND {
namespace {
constexpr int kThreads = 256;
constexpr int kMaxSweeps = 60;
constexpr double kTol = 1e-13;  // |a_p·a_q| <= kTol·|a_p||a_q| counts as orthogonal

// Block-wide sum of one value per thread (all threads get the result).
__device__ double block_sum(double v, double* scratch) {
  scratch[threadIdx.x] = v;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (int(threadIdx.x) < s) scratch[threadIdx.x] += scratch[threadIdx.x + s];
    __syncthreads();
  }
  const double r = scratch[0];
  __syncthreads();
  return r;
}

// Matrix b: A[n, d] and V[d, d] (double, row-major scratch), order[d] (scratch).
__global__ void jacobi_svd_kernel(const float* X, int64_t n, int d, double* A_all, double* V_all, int* order_all,
                                  float* sigma, float* us, float* vt) {
  __shared__ double scratch[kThreads];
  __shared__ int rotated;
  const int64_t b = blockIdx.x;
  double* A = A_all + b * n * d;
  double* V = V_all + b * int64_t(d) * d;
  int* order = order_all + b * d;
  X += b * n * d;
  for (int64_t e = threadIdx.x; e < n * d; e += blockDim.x) A[e] = X[e];
  for (int64_t e = threadIdx.x; e < int64_t(d) * d; e += blockDim.x) V[e] = e / d == e % d ? 1.0 : 0.0;
  __syncthreads();
  for (int sweep = 0; sweep < kMaxSweeps; ++sweep) {
    if (threadIdx.x == 0) rotated = 0;
    __syncthreads();
    for (int p = 0; p < d - 1; ++p)
      for (int q = p + 1; q < d; ++q) {
        double al = 0, be = 0, ga = 0;
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
          const double ap = A[i * d + p], aq = A[i * d + q];
          al += ap * ap;
          be += aq * aq;
          ga += ap * aq;
        }
        al = block_sum(al, scratch);
        be = block_sum(be, scratch);
        ga = block_sum(ga, scratch);
        if (!(fabs(ga) > kTol * sqrt(al * be))) continue;  // already orthogonal (or a zero column)
        // The rotation that zeroes a_p·a_q: tan θ = t, the smaller root of t² + 2ζt - 1 = 0.
        const double zeta = (be - al) / (2 * ga);
        const double t = (zeta >= 0 ? 1.0 : -1.0) / (fabs(zeta) + sqrt(1 + zeta * zeta));
        const double c = 1 / sqrt(1 + t * t), s = c * t;
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
          const double ap = A[i * d + p], aq = A[i * d + q];
          A[i * d + p] = c * ap - s * aq;
          A[i * d + q] = s * ap + c * aq;
        }
        for (int i = threadIdx.x; i < d; i += blockDim.x) {
          const double vp = V[int64_t(i) * d + p], vq = V[int64_t(i) * d + q];
          V[int64_t(i) * d + p] = c * vp - s * vq;
          V[int64_t(i) * d + q] = s * vp + c * vq;
        }
        if (threadIdx.x == 0) rotated = 1;
        __syncthreads();
      }
    __syncthreads();
    if (!rotated) break;
    __syncthreads();
  }
  // σ_j = |a_j|; order = columns by σ descending (ties by lower column), a selection sort on one thread.
  for (int j = 0; j < d; ++j) {
    double s2 = 0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s2 += A[i * d + j] * A[i * d + j];
    s2 = block_sum(s2, scratch);
    if (threadIdx.x == 0) sigma[b * d + j] = float(sqrt(s2));
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    float* sg = sigma + b * d;
    for (int j = 0; j < d; ++j) order[j] = j;
    for (int j = 0; j < d; ++j) {
      int best = j;
      for (int k = j + 1; k < d; ++k)
        if (sg[order[k]] > sg[order[best]]) best = k;
      const int tmp = order[j];
      order[j] = order[best];
      order[best] = tmp;
    }
  }
  __syncthreads();
  // Write U·Σ columns and Vᵀ rows in that order; then σ in that order.
  for (int64_t e = threadIdx.x; e < n * d; e += blockDim.x)
    us[b * n * d + e] = float(A[(e / d) * d + order[e % d]]);
  for (int64_t e = threadIdx.x; e < int64_t(d) * d; e += blockDim.x)
    vt[b * int64_t(d) * d + e] = float(V[(e % d) * d + order[e / d]]);
  __syncthreads();
  if (threadIdx.x == 0) {
    float* sg = sigma + b * d;
    // σ in that order, through V's first row as scratch (V is written out already).
    for (int j = 0; j < d; ++j) V[j] = sg[order[j]];
    for (int j = 0; j < d; ++j) sg[j] = float(V[j]);
  }
}
}  // namespace

void svd_jacobi(const float* X, int batch, int64_t n, int d, float* sigma, float* us, float* vt) {
  if (batch <= 0 || n <= 0 || d <= 0) return;
  if (n * d > (int64_t(1) << 31)) throw std::invalid_argument("svd_jacobi: matrix too large for the simple kernel");
  DeviceBuffer<double> A(size_t(batch) * n * d), V(size_t(batch) * d * d);
  DeviceBuffer<int> order(size_t(batch) * d);
  KVSIM_LAUNCH(jacobi_svd_kernel, unsigned(batch), kThreads)(X, n, d, A.get(), V.get(), order.get(), sigma, us, vt);
  detail::check_launch("svd_jacobi");
}

}  // namespace kvsim::ref::KVSIM_CUDA_BACKEND
