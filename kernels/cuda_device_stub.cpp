#include "kernels/cuda_device.hpp"

namespace kvsim::cuda {

bool built_with_cuda() { return false; }

std::vector<DeviceInfo> devices(std::string* why) {
  if (why) *why = "kvsim was built without CUDA (nvcc not found at configure time)";
  return {};
}

}  // namespace kvsim::cuda
