// What the CUDA runtime says about the GPUs of this machine. Built from cuda_device.cu where nvcc
// exists, from cuda_device_stub.cpp elsewhere (which reports that CUDA was not built in).
#pragma once
#include <string>
#include <vector>

namespace kvsim::cuda {

struct DeviceInfo {
  int index = 0;
  std::string name;
  int sm_count = 0;
  int compute_major = 0, compute_minor = 0;
  double memory_bytes = 0;
  double l2_bytes = 0;
};

bool built_with_cuda();
// Empty when CUDA was not built in, no driver is loaded, or no GPU is present; `why` says which.
std::vector<DeviceInfo> devices(std::string* why = nullptr);

}  // namespace kvsim::cuda
