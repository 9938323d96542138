// The harness both CUDA kernel test files share (tests/test_reference_cuda.cpp,
// tests/test_optimized_cuda.cpp): a case list per build of the launchers, and a registration that puts
// the emulator's cases in every build and the GPU's only where nvcc built them and a device exists, so
// nothing skips for want of a GPU.
//
// A file includes its cases (.inc) once per namespace that defines `cases()` and the launchers' aliases;
// KVSIM_CUDA_CASE lists each case in the enclosing namespace's `cases()` as it is defined.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace kvsim::test {

struct CudaCaseDef {
  const char* name;
  void (*run)();
};

// Defines the case `name` and lists it in the enclosing namespace's cases().
#define KVSIM_CUDA_CASE(name)                                                                    \
  void name();                                                                                   \
  [[maybe_unused]] const bool name##_listed = (cases().push_back({#name, &name}), true);         \
  void name()

class CudaCase : public testing::Test {
 public:
  explicit CudaCase(void (*run)()) : run_(run) {}
  void TestBody() override { run_(); }

 private:
  void (*run_)();
};

// Registers every case of one build of the launchers as suite `suite`.
inline void register_cuda_cases(const char* suite, const std::vector<CudaCaseDef>& cases) {
  for (const CudaCaseDef& c : cases)
    testing::RegisterTest(suite, c.name, nullptr, nullptr, __FILE__, __LINE__,
                          [run = c.run]() -> testing::Test* { return new CudaCase(run); });
}

// The optimized kernels' cases on the emulator (tests/test_optimized_cuda.cpp), for tests that rerun
// them under a changed emulator (tests/test_emu_checker.cpp).
const std::vector<CudaCaseDef>& optimized_emu_cases();

// Element-wise closeness relative to the host value; infinities must match exactly.
inline void expect_close(const std::vector<float>& a, const std::vector<float>& b, double tol) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isinf(b[i])) {
      EXPECT_EQ(a[i], b[i]) << i;
      continue;
    }
    EXPECT_NEAR(a[i], b[i], tol * (1 + std::abs(b[i]))) << i;
  }
}

}  // namespace kvsim::test
