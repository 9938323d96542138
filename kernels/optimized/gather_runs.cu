// The staging gather of offloaded KV: runs of adjacent rows (run_planner.hpp merges adjacent pages)
// copied into a staging buffer, one block per run, 16-byte float4 loads and stores when rows allow.
// The source may be mapped pinned host memory (UVA), which makes this the zero-copy gather over PCIe;
// device to pinned staging is the other direction of the same copy. Design and bound:
// kernels/optimized/README.md.
#include <cstdint>
#include <stdexcept>

#include "kernels/optimized/cuda.hpp"
#include "kernels/reference/cuda_common.cuh"

namespace kvsim::opt::KVSIM_CUDA_BACKEND {
namespace {
namespace check = ::kvsim::ref::KVSIM_CUDA_BACKEND::detail;

constexpr int kThreads = 256;
constexpr int64_t kMaxGridX = 2147483647;

// T = float4 when every run starts and ends on a 16-byte boundary (row_elems % 4 == 0, aligned bases),
// else float: the copy is the same, only the width of each load.
template <class T>
__global__ void __launch_bounds__(kThreads) copy_runs_kernel(GatherRunsParams p) {
  constexpr int64_t kPer = sizeof(T) / sizeof(float);
  // The run's three ints, loaded by one thread (three 4-byte loads, not three per warp) and shared.
  __shared__ int32_t run[3];
  const int64_t r = blockIdx.x;
  if (threadIdx.x == 0) run[0] = p.rows[r], run[1] = p.src_row[r], run[2] = p.dst_row[r];
  __syncthreads();
  const int64_t len = int64_t(run[0]) * p.row_elems / kPer;
  const T* src = reinterpret_cast<const T*>(p.src + int64_t(run[1]) * p.row_elems);
  T* dst = reinterpret_cast<T*>(p.dst + int64_t(run[2]) * p.row_elems);
  // Consecutive threads on consecutive 16-byte words: each warp moves 512 contiguous bytes per step.
  for (int64_t i = threadIdx.x; i < len; i += blockDim.x) dst[i] = src[i];
}
}  // namespace

void gather_runs(const GatherRunsParams& p) {
  if (p.num_runs < 0 || p.row_elems < 0) throw std::runtime_error("opt::gather_runs: negative size");
  if (p.num_runs == 0 || p.row_elems == 0) return;
  if (p.num_runs > kMaxGridX) throw std::runtime_error("opt::gather_runs: more runs than a grid holds");
  const bool vec = p.row_elems % 4 == 0 && reinterpret_cast<uintptr_t>(p.src) % 16 == 0 &&
                   reinterpret_cast<uintptr_t>(p.dst) % 16 == 0;
  if (vec)
    KVSIM_LAUNCH(copy_runs_kernel<float4>, unsigned(p.num_runs), kThreads)(p);
  else
    KVSIM_LAUNCH(copy_runs_kernel<float>, unsigned(p.num_runs), kThreads)(p);
  check::check(cudaGetLastError(), "opt::gather_runs");  // no synchronization: nothing to read back
}

}  // namespace kvsim::opt::KVSIM_CUDA_BACKEND
