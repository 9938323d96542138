// Row means on the device: SentenceKV's segment means (kvsim::ref::segment_mean) and CHESS's page
// vectors, tail mean and group means (ref::chess_page_vectors, tail_mean, group_mean: all page means of
// some rows). One thread per output element, consecutive threads on consecutive channels, so each row's
// read is coalesced across a warp; each thread sums its rows in order and divides by the count in float,
// exactly the host's arithmetic, so the means (and CHESS's scores over them) are bit-identical.
// Bound: the rows' bytes once, n·d FLOPs; memory-bound.
#include <stdexcept>

#include "kernels/optimized/cuda.hpp"
#include "kernels/reference/cuda_common.cuh"

namespace kvsim::opt::KVSIM_CUDA_BACKEND {
namespace {
namespace check = ::kvsim::ref::KVSIM_CUDA_BACKEND::detail;
constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads) segment_mean_kernel(SegmentMeanParams p) {
  const int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= p.segments * p.d) return;
  const int64_t s = e / p.d;
  const int c = int(e % p.d);
  const int64_t b = p.starts[s], end = s + 1 < p.segments ? p.starts[s + 1] : p.n;
  float acc = 0.f;
  for (int64_t t = b; t < end; ++t) acc += p.X[t * p.d + c];
  p.out[e] = acc / float(end - b);
}

// Element e = (page, source, channel), channel fastest.
__global__ void __launch_bounds__(kThreads) page_mean_kernel(PageMeanParams p, int64_t pages) {
  const int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= pages * p.sources * p.d) return;
  const int c = int(e % p.d);
  const int64_t s = (e / p.d) % p.sources, pg = e / (int64_t(p.d) * p.sources);
  const int64_t b = pg * p.page_size, end = b + p.page_size < p.n ? b + p.page_size : p.n;
  const float* X = p.X + s * p.n * p.d;
  float acc = 0.f;
  for (int64_t t = b; t < end; ++t) acc += X[t * p.d + c];
  p.out[e] = acc / float(end - b);
}
}  // namespace

void segment_mean(const SegmentMeanParams& p) {
  if (p.n < 0 || p.d < 0 || p.segments < 0) throw std::runtime_error("opt::segment_mean: negative size");
  if (p.segments * p.d == 0) return;
  KVSIM_LAUNCH(segment_mean_kernel, check::blocks_for(p.segments * p.d, kThreads), kThreads)(p);
  check::check(cudaGetLastError(), "opt::segment_mean");
}

void page_mean(const PageMeanParams& p) {
  if (p.page_size <= 0) throw std::runtime_error("opt::page_mean: page_size <= 0");
  if (p.n < 0 || p.d < 0 || p.sources < 0) throw std::runtime_error("opt::page_mean: negative size");
  const int64_t pages = (p.n + p.page_size - 1) / p.page_size;
  const int64_t total = pages * p.sources * p.d;
  if (total == 0) return;
  KVSIM_LAUNCH(page_mean_kernel, check::blocks_for(total, kThreads), kThreads)(p, pages);
  check::check(cudaGetLastError(), "opt::page_mean");
}

}  // namespace kvsim::opt::KVSIM_CUDA_BACKEND
