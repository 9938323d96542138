// Dot or cosine scores S[m, n] = scale·Q·Mᵀ that are bit-identical to the host reference
// (kvsim::ref::score_gemv / score_gemm and kvsim::host::exact_dots): every score is one thread's
// sequential hd::dot, the reference's summation order. A warp-reduced dot (chess_select.cu's) sums in
// another order, which moves scores by an ulp and can reorder near-ties — then CHESS's and SentenceKV's
// selections would match the host's only within a tolerance. Consecutive threads take consecutive keys
// of one query row, so the query row is shared through L1; each key row is read by its own thread
// (strided, d·4 bytes apart) — the price of the exact order. Bound: m·n·d·4 bytes of keys through L1/L2
// for m > 1 (each key row once per query row), 2·m·n·d FLOPs; memory-bound.
#include <stdexcept>

#include "kernels/optimized/cuda.hpp"
#include "kernels/reference/cuda_common.cuh"
#include "kernels/reference/hd.hpp"

namespace kvsim::opt::KVSIM_CUDA_BACKEND {
namespace {
namespace check = ::kvsim::ref::KVSIM_CUDA_BACKEND::detail;
namespace hd = ::kvsim::ref::hd;
constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads) exact_scores_kernel(ExactScoreParams p) {
  const int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= p.m * p.n) return;
  const float* q = p.Q + (e / p.n) * p.d;
  const float* r = p.M + (e % p.n) * p.d;
  if (!p.cosine) {
    p.S[e] = p.scale * hd::dot(q, r, p.d);
    return;
  }
  const float den = sqrtf(hd::dot(q, q, p.d)) * sqrtf(hd::dot(r, r, p.d));
  p.S[e] = den > 0.f ? hd::dot(q, r, p.d) / den : 0.f;  // a zero vector scores 0, as on the host
}
}  // namespace

void exact_scores(const ExactScoreParams& p) {
  if (p.m < 0 || p.n < 0 || p.d < 0) throw std::runtime_error("opt::exact_scores: negative size");
  if (p.m * p.n == 0) return;
  KVSIM_LAUNCH(exact_scores_kernel, check::blocks_for(p.m * p.n, kThreads), kThreads)(p);
  check::check(cudaGetLastError(), "opt::exact_scores");
}

}  // namespace kvsim::opt::KVSIM_CUDA_BACKEND
