// SEKV's span factors (eq. 6) on the device: the singular triplets of a span block X[n, d] from the
// eigenproblem of its small Gram matrix — X·Xᵀ for a span of n <= d tokens, else Xᵀ·X — in double,
// exactly the method of kvsim::host::truncated_svd (kernels/host/README.md), the one the host replay runs:
// σ_j = sqrt(λ_j) descending; wide: U·Σ = σ_j·e_j and Vᵀ_j = (Xᵀe_j)/σ_j; tall: U·Σ = X·e_j, Vᵀ_j = e_jᵀ.
// All k = min(n, d) triplets are written; the energy rank rule (ref::factor_spectrum, the function every
// SVD path shares) then picks r on the host from σ and ||X||_F² (also computed here, in double). The
// factors agree with the host's to double rounding relative to σ_1 (a pair's sign may differ; U·Σ·Vᵀ does
// not): the replay compares the attention outputs, which read only the reconstruction.
// Why not the reference twin svd_jacobi (kernels/reference/lowrank.cu): it needs n >= d (most spans are
// shorter than d) and a barrier per rotation across 256 threads — thousands of spans per prefill would
// take hours under the emulator. One thread per span block here (jacobi_eigen.cuh): the Gram matrix is
// at most d×d. Bound: 2·n·d·k FLOPs for the Gram matrix, ~10 sweeps of 6·k³ for the solver, 2·n·d·k to
// recover the vectors; one thread, so latency-bound — a prefill-time cost.
#include <stdexcept>
#include <string>

#include "kernels/optimized/cuda.hpp"
#include "kernels/optimized/jacobi_eigen.cuh"
#include "kernels/reference/cuda_common.cuh"

namespace kvsim::opt::KVSIM_CUDA_BACKEND {
namespace {
namespace check = ::kvsim::ref::KVSIM_CUDA_BACKEND::detail;
constexpr int kMaxDim = 256;

__global__ void span_svd_kernel(SpanSvdParams p) {
  const int64_t n = p.n;
  const int d = p.d;
  const bool wide = n <= d;
  const int k = int(wide ? n : d);
  const float* X = p.X;
  double total = 0;
  for (int64_t e = 0; e < n * d; ++e) total += double(X[e]) * double(X[e]);
  *p.total = total;
  double* G = p.gram;
  for (int i = 0; i < k; ++i)
    for (int j = i; j < k; ++j) {
      double s = 0;
      if (wide)
        for (int c = 0; c < d; ++c) s += double(X[int64_t(i) * d + c]) * double(X[int64_t(j) * d + c]);
      else
        for (int64_t t = 0; t < n; ++t) s += double(X[t * d + i]) * double(X[t * d + j]);
      G[i * k + j] = s;
      G[j * k + i] = s;
    }
  int order[kMaxDim];
  jacobi::eigen(G, p.vecs, k, order);
  const double* E = p.vecs;
  for (int j = 0; j < k; ++j) {
    const int col = order[j];
    const double lam = G[col * k + col];
    const double s = sqrt(lam > 0 ? lam : 0.0);
    p.sigma[j] = s;
    if (wide) {  // E = U: U·Σ = σ u, v = Xᵀu / σ
      for (int64_t i = 0; i < n; ++i) p.us[i * k + j] = float(E[i * k + col] * s);
      for (int c = 0; c < d; ++c) {
        double a = 0;
        for (int64_t i = 0; i < n; ++i) a += double(X[i * d + c]) * E[i * k + col];
        p.vt[int64_t(j) * d + c] = s > 0 ? float(a / s) : 0.f;
      }
    } else {  // E = V: U·Σ = X v
      for (int64_t t = 0; t < n; ++t) {
        double a = 0;
        for (int c = 0; c < d; ++c) a += double(X[t * d + c]) * E[c * k + col];
        p.us[t * k + j] = float(a);
      }
      for (int c = 0; c < d; ++c) p.vt[int64_t(j) * d + c] = float(E[c * k + col]);
    }
  }
}
}  // namespace

void span_svd(const SpanSvdParams& p) {
  if (p.n <= 0 || p.d <= 0) throw std::runtime_error("opt::span_svd: empty block");
  const int64_t k = p.n < p.d ? p.n : p.d;
  if (k > kMaxDim) throw std::runtime_error("opt::span_svd: min(n, d) " + std::to_string(k) + " above 256");
  if (!p.sigma || !p.us || !p.vt || !p.gram || !p.vecs || !p.total) throw std::runtime_error("opt::span_svd: buffer missing");
  KVSIM_LAUNCH(span_svd_kernel, 1, 1)(p);
  check::check(cudaGetLastError(), "opt::span_svd");
}

}  // namespace kvsim::opt::KVSIM_CUDA_BACKEND
