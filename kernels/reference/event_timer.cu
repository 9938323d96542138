// CUDA-event timing and pinned host memory for `kvsim validate --device cuda` (see cuda.hpp). Events
// time the GPU's own work on the default stream, not the host's view of it.
#include "kernels/reference/cuda.hpp"
#include "kernels/reference/cuda_common.cuh"

namespace kvsim::ref::KVSIM_CUDA_BACKEND {

double event_seconds(const std::function<void()>& f) {
  cudaEvent_t start, stop;
  detail::check(cudaEventCreate(&start), "cudaEventCreate");
  detail::check(cudaEventCreate(&stop), "cudaEventCreate");
  float ms = 0;
  try {
    detail::check(cudaEventRecord(start), "cudaEventRecord");
    f();
    detail::check(cudaEventRecord(stop), "cudaEventRecord");
    detail::check(cudaEventSynchronize(stop), "cudaEventSynchronize");
    detail::check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
  } catch (...) {
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    throw;
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return double(ms) * 1e-3;
}

void* pinned_alloc(size_t bytes) {
  void* p = nullptr;
  detail::check(cudaMallocHost(&p, bytes), "cudaMallocHost");
  return p;
}
void pinned_free(void* p) {
  if (p) cudaFreeHost(p);
}
void copy_h2d(void* dst_device, const void* src_pinned, size_t bytes) {
  detail::check(cudaMemcpyAsync(dst_device, src_pinned, bytes, cudaMemcpyHostToDevice), "copy_h2d");
  detail::check(cudaStreamSynchronize(0), "copy_h2d");
}

}  // namespace kvsim::ref::KVSIM_CUDA_BACKEND
