// The simple CUDA reference kernels (kernels/reference/*.cu) against their host twins on random inputs
// (the cases are in tests/reference_cuda_cases.inc). Every build runs them on the CPU through the CUDA
// emulator (kvsim::ref::cuda_emu, suite RefKernelsCudaEmu), so none skips for want of a GPU; where
// nvcc built the real kernels and a GPU is present, they run there as well (suite RefKernelsCudaGpu,
// registered only then).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda_device.hpp"
#include "tests/cuda_case.hpp"
#include "kernels/reference/cuda.hpp"
#include "kernels/reference/reference.hpp"

namespace {

using namespace kvsim::ref;
using Vec = std::vector<float>;

Vec randn(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0.f, 1.f);
  Vec v(n);
  for (auto& x : v) x = g(rng);
  return v;
}
using kvsim::test::expect_close;
constexpr int D = 64;
const float kScale = 0.125f;

// One case of one build of the launchers.
using Case = kvsim::test::CudaCaseDef;

namespace on_cpu {
namespace cuda = kvsim::ref::cuda_emu;
template <class T>
using DBuf = cuda::DeviceBuffer<T>;
std::vector<Case>& cases() {
  static std::vector<Case> c;
  return c;
}
#include "tests/reference_cuda_cases.inc"
}  // namespace on_cpu

#if defined(KVSIM_HAVE_CUDA)
namespace on_gpu {
namespace cuda = kvsim::ref::cuda;
template <class T>
using DBuf = cuda::DeviceBuffer<T>;
std::vector<Case>& cases() {
  static std::vector<Case> c;
  return c;
}
#include "tests/reference_cuda_cases.inc"
}  // namespace on_gpu
#endif

// After both case lists (initialized above, in this file's order).
[[maybe_unused]] const bool registered = [] {
  kvsim::test::register_cuda_cases("RefKernelsCudaEmu", on_cpu::cases());
#if defined(KVSIM_HAVE_CUDA)
  if (!kvsim::cuda::devices().empty()) kvsim::test::register_cuda_cases("RefKernelsCudaGpu", on_gpu::cases());
#endif
  return true;
}();

}  // namespace
