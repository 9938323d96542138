// Inputs of the CUDA validation cases (cuda_cases.cpp, cuda_optimized_cases.cpp): device buffers
// filled with uniform values in [-1, 1) from a seed. CUDA builds only.
#pragma once
#if defined(KVSIM_HAVE_CUDA)
#include <memory>
#include <random>
#include <vector>

#include "kernels/reference/cuda.hpp"

namespace kvsim::validate {

inline std::shared_ptr<ref::cuda::DeviceBuffer<float>> device_random(size_t n, uint32_t seed) {
  std::vector<float> h(n);
  std::minstd_rand rng(seed + 1);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (auto& x : h) x = u(rng);
  return std::make_shared<ref::cuda::DeviceBuffer<float>>(h);
}

}  // namespace kvsim::validate
#endif
