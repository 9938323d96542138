#include <cuda_runtime.h>

#include "kernels/cuda_device.hpp"

namespace kvsim::cuda {

bool built_with_cuda() { return true; }

std::vector<DeviceInfo> devices(std::string* why) {
  int n = 0;
  const cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) {
    if (why) *why = std::string("CUDA runtime: ") + cudaGetErrorString(err);
    return {};
  }
  std::vector<DeviceInfo> out;
  for (int i = 0; i < n; ++i) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, i) != cudaSuccess) continue;
    DeviceInfo d;
    d.index = i;
    d.name = p.name;
    d.sm_count = p.multiProcessorCount;
    d.compute_major = p.major;
    d.compute_minor = p.minor;
    d.memory_bytes = double(p.totalGlobalMem);
    d.l2_bytes = double(p.l2CacheSize);
    out.push_back(d);
  }
  if (out.empty() && why) *why = "no CUDA device present";
  return out;
}

}  // namespace kvsim::cuda
