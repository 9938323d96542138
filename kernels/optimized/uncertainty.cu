// CHESS's uncertainty monitor (policies/chess/cost.cpp, phase `uncertainty`): the entropy and the
// varentropy of the output distribution softmax(logits), every step, from one read of the logits.
// With m = max x, y = x - m, S0 = Σ e^y, S1 = Σ e^y·y, S2 = Σ e^y·y², log p = y - log S0, so
//   H = -Σ p log p = log S0 - S1/S0,   varentropy = Var(log p) = Var(y) = S2/S0 - (S1/S0)².
// Each thread keeps (m, S0, S1, S2) online over its elements; partial states merge by rescaling to the
// larger max (e^Δ with Δ = m_a - m <= 0: S0·e^Δ, (S1 + Δ·S0)·e^Δ, (S2 + 2Δ·S1 + Δ²·S0)·e^Δ). Two
// stream-ordered launches, no host synchronization: (1) a grid of blocks per row, each reducing a slice
// of kSlice logits to one partial state; (2) one warp per row merging its slices' partials.
// Bound: vocab·4 bytes read per row, ~6 FLOPs and one exp per logit: HBM-bound.
#include <cmath>
#include <stdexcept>
#include <string>

#include "kernels/optimized/cuda.hpp"
#include "kernels/reference/cuda_common.cuh"

namespace kvsim::opt::KVSIM_CUDA_BACKEND {
namespace {
namespace check = ::kvsim::ref::KVSIM_CUDA_BACKEND::detail;
constexpr int kThreads = 256;
constexpr int64_t kSlice = 4096;  // logits per block: 16 per thread
constexpr unsigned kFullWarp = 0xffffffffu;

struct State {
  float m, s0, s1, s2;
};

__device__ __forceinline__ State merge(State a, State b) {
  if (b.m > a.m) {
    const State t = a;
    a = b, b = t;
  }
  // An empty state, or logits of -inf (probability 0), add nothing (and would make 0 x inf a NaN).
  if (b.s0 == 0.f || b.m == -INFINITY) return a;
  const float dl = b.m - a.m, e = expf(dl);
  return {a.m, a.s0 + b.s0 * e, a.s1 + (b.s1 + dl * b.s0) * e, a.s2 + (b.s2 + 2.f * dl * b.s1 + dl * dl * b.s0) * e};
}

__device__ __forceinline__ State add(State a, float x) { return merge(a, State{x, 1.f, 0.f, 0.f}); }

__device__ __forceinline__ State warp_merge(State s) {
  for (int o = 16; o > 0; o >>= 1) {
    const State t{__shfl_xor_sync(kFullWarp, s.m, o), __shfl_xor_sync(kFullWarp, s.s0, o),
                  __shfl_xor_sync(kFullWarp, s.s1, o), __shfl_xor_sync(kFullWarp, s.s2, o)};
    s = merge(s, t);
  }
  return s;
}

// Block (slice, row): its slice's partial state to partials[row, slice]. Consecutive threads read
// consecutive logits (coalesced).
__global__ void __launch_bounds__(kThreads) slice_state_kernel(UncertaintyParams p, int64_t slices) {
  __shared__ State warp_state[kThreads / 32];
  const int64_t row = blockIdx.y, lo = int64_t(blockIdx.x) * kSlice;
  const int64_t hi = lo + kSlice < p.vocab ? lo + kSlice : p.vocab;
  const float* x = p.logits + row * p.vocab;
  State s{-INFINITY, 0.f, 0.f, 0.f};
  for (int64_t i = lo + threadIdx.x; i < hi; i += blockDim.x) s = add(s, x[i]);
  s = warp_merge(s);
  if ((threadIdx.x & 31) == 0) warp_state[threadIdx.x >> 5] = s;
  __syncthreads();
  if (threadIdx.x < 32) {
    State b = threadIdx.x < (blockDim.x >> 5) ? warp_state[threadIdx.x] : State{-INFINITY, 0.f, 0.f, 0.f};
    b = warp_merge(b);
    if (threadIdx.x == 0) reinterpret_cast<float4*>(p.partials)[row * slices + blockIdx.x] = {b.m, b.s0, b.s1, b.s2};
  }
}

// One warp per row: the slices' partials merged, then H and the varentropy.
__global__ void row_result_kernel(UncertaintyParams p, int64_t slices) {
  const int64_t row = blockIdx.x;
  State s{-INFINITY, 0.f, 0.f, 0.f};
  for (int64_t j = threadIdx.x; j < slices; j += 32) {
    const float4 t = reinterpret_cast<const float4*>(p.partials)[row * slices + j];
    s = merge(s, State{t.x, t.y, t.z, t.w});
  }
  s = warp_merge(s);
  if (threadIdx.x == 0) {
    const float mean = s.s1 / s.s0;
    p.out[2 * row] = logf(s.s0) - mean;
    p.out[2 * row + 1] = fmaxf(0.f, s.s2 / s.s0 - mean * mean);
  }
}
}  // namespace

int64_t uncertainty_partials_floats(int64_t vocab, int rows) {
  return vocab > 0 && rows > 0 ? 4 * int64_t(rows) * ((vocab + kSlice - 1) / kSlice) : 0;
}

void uncertainty(const UncertaintyParams& p) {
  if (p.vocab <= 0 || p.rows <= 0 || p.rows > 65535)
    throw std::runtime_error("opt::uncertainty: vocab " + std::to_string(p.vocab) + " and rows " +
                             std::to_string(p.rows) + " (vocab > 0, rows in [1, 65535])");
  if (!p.logits || !p.out || !p.partials) throw std::runtime_error("opt::uncertainty: logits, out and partials required");
  if (reinterpret_cast<uintptr_t>(p.partials) % 16) throw std::runtime_error("opt::uncertainty: partials not 16-byte aligned");
  const int64_t slices = (p.vocab + kSlice - 1) / kSlice;
  KVSIM_LAUNCH(slice_state_kernel, dim3(unsigned(slices), unsigned(p.rows)), kThreads)(p, slices);
  check::check(cudaGetLastError(), "opt::uncertainty (slices)");
  KVSIM_LAUNCH(row_result_kernel, unsigned(p.rows), 32)(p, slices);
  check::check(cudaGetLastError(), "opt::uncertainty (rows)");
}

}  // namespace kvsim::opt::KVSIM_CUDA_BACKEND
