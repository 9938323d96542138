// The optimized CUDA kernels (kernels/optimized/*.cu) against the host reference (kvsim::ref) on random,
// non-zero inputs (the cases are in tests/optimized_cuda_cases.inc). As tests/test_reference_cuda.cpp
// does it: every build runs them on the CPU through the CUDA emulator (suite OptKernelsCudaEmu), none
// skipping for want of a GPU; where nvcc built the kernels and a GPU is present they run there as well
// (suite OptKernelsCudaGpu, registered only then). The host-side run planner is tested directly
// (suite OptRunPlanner).
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda_device.hpp"
#include "tests/cuda_case.hpp"
#include "kernels/optimized/cuda.hpp"
#include "kernels/optimized/run_planner.hpp"
#include "kernels/reference/cuda.hpp"
#include "kernels/reference/reference.hpp"
#include "validate/validate.hpp"

namespace {

using namespace kvsim::ref;
using kvsim::opt::CentroidRecallParams;
using kvsim::opt::GatherRunsParams;
using kvsim::opt::PagedDecodeParams;
using kvsim::opt::TopkParams;
using Vec = std::vector<float>;

// Normal values shifted away from zero, so no product or sum vanishes by accident.
Vec randn(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0.f, 1.f);
  Vec v(n);
  for (auto& x : v) {
    x = g(rng);
    x += x >= 0.f ? 0.05f : -0.05f;
  }
  return v;
}
using kvsim::test::expect_close;

using Case = kvsim::test::CudaCaseDef;

namespace on_cpu {
namespace cuda = kvsim::opt::cuda_emu;
namespace refcuda = kvsim::ref::cuda_emu;
template <class T>
using DBuf = refcuda::DeviceBuffer<T>;
std::vector<Case>& cases() {
  static std::vector<Case> c;
  return c;
}
#include "tests/optimized_cuda_cases.inc"
}  // namespace on_cpu

#if defined(KVSIM_HAVE_CUDA)
namespace on_gpu {
namespace cuda = kvsim::opt::cuda;
namespace refcuda = kvsim::ref::cuda;
template <class T>
using DBuf = refcuda::DeviceBuffer<T>;
std::vector<Case>& cases() {
  static std::vector<Case> c;
  return c;
}
#include "tests/optimized_cuda_cases.inc"
}  // namespace on_gpu
#endif

[[maybe_unused]] const bool registered = [] {
  kvsim::test::register_cuda_cases("OptKernelsCudaEmu", on_cpu::cases());
#if defined(KVSIM_HAVE_CUDA)
  if (!kvsim::cuda::devices().empty()) kvsim::test::register_cuda_cases("OptKernelsCudaGpu", on_gpu::cases());
#endif
  return true;
}();

TEST(OptRunPlanner, MergesAdjacentPagesKeepsOrderAndCapsRuns) {
  const std::vector<int32_t> pages = {3, 4, 5, 9, 10, 2, 3, 7};
  auto r = kvsim::opt::plan_page_runs(pages, 2);
  EXPECT_EQ(r.src_row, (std::vector<int32_t>{6, 18, 4, 14}));
  EXPECT_EQ(r.rows, (std::vector<int32_t>{6, 4, 4, 2}));
  EXPECT_EQ(r.dst_row, (std::vector<int32_t>{0, 6, 10, 14}));
  EXPECT_EQ(r.total_rows, 16);
  r = kvsim::opt::plan_page_runs(pages, 1, 2);  // {3,4} {5} {9,10} {2,3} {7}
  EXPECT_EQ(r.src_row, (std::vector<int32_t>{3, 5, 9, 2, 7}));
  EXPECT_EQ(r.rows, (std::vector<int32_t>{2, 1, 2, 2, 1}));
  EXPECT_EQ(kvsim::opt::plan_page_runs({}, 4).size(), 0);
  EXPECT_THROW(kvsim::opt::plan_page_runs(pages, 0), std::invalid_argument);
  const std::vector<int32_t> bad = {1, -1};
  EXPECT_THROW(kvsim::opt::plan_page_runs(bad, 1), std::invalid_argument);
}

// `kvsim validate --device cuda` times every optimized kernel: its case list holds them where CUDA is
// built in (the list is empty without it, and validate stops before it).
TEST(OptKernelsValidate, CudaCaseListIncludesTheOptimizedKernels) {
  std::vector<std::string> names;
  for (const auto& c : kvsim::validate::cuda_cases()) names.push_back(c.phase);
#if defined(KVSIM_HAVE_CUDA)
  for (const char* want : {"cuda_opt_paged_decode", "cuda_opt_sparse_paged", "cuda_opt_topk", "cuda_opt_gather_runs",
                           "cuda_opt_centroid_recall", "cuda_opt_chess_select"})
    EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;
#else
  EXPECT_TRUE(names.empty());
#endif
}

}  // namespace

// The emulator's cases, for the access checker's barrier-deletion test (tests/test_emu_checker.cpp).
const std::vector<kvsim::test::CudaCaseDef>& kvsim::test::optimized_emu_cases() { return on_cpu::cases(); }
