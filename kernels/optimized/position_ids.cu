// StreamingLLM's kept ids (the first `sinks` tokens and the most recent `window` of 0..n-1), and full
// attention's 0..n-1 (sinks = n), written on the device where the attention that reads them runs. One
// thread per output id; the count is a host formula, so nothing is read back.
#include <stdexcept>

#include "kernels/optimized/cuda.hpp"
#include "kernels/reference/cuda_common.cuh"

namespace kvsim::opt::KVSIM_CUDA_BACKEND {
namespace {
namespace check = ::kvsim::ref::KVSIM_CUDA_BACKEND::detail;
constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads) position_ids_kernel(int64_t sink_end, int64_t recent_begin, int64_t total,
                                                                int32_t* out) {
  const int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j < total) out[j] = int32_t(j < sink_end ? j : recent_begin + (j - sink_end));
}
}  // namespace

int64_t position_ids(const PositionIdsParams& p) {
  if (p.n < 0 || p.n > INT32_MAX) throw std::runtime_error("opt::position_ids: n outside [0, 2^31)");
  const int64_t sink_end = p.sinks < 0 ? 0 : (p.sinks > p.n ? p.n : p.sinks);
  const int64_t w = p.window < 0 ? 0 : p.window;
  const int64_t recent_begin = p.n - w > sink_end ? p.n - w : sink_end;
  const int64_t total = sink_end + (p.n - recent_begin);
  if (total == 0) return 0;
  KVSIM_LAUNCH(position_ids_kernel, check::blocks_for(total, kThreads), kThreads)(sink_end, recent_begin, total, p.out);
  check::check(cudaGetLastError(), "opt::position_ids");
  return total;
}

}  // namespace kvsim::opt::KVSIM_CUDA_BACKEND
