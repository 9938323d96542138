// The CUDA runtime query builds wherever nvcc exists and answers sensibly; it skips without a GPU.
#include <gtest/gtest.h>

#include "kernels/cuda_device.hpp"

TEST(CudaDevice, ReportsDevicesOrSaysWhyNot) {
  std::string why;
  const auto devs = kvsim::cuda::devices(&why);
  if (devs.empty()) {
    EXPECT_FALSE(why.empty());
    GTEST_SKIP() << "no GPU: " << why;
  }
  for (const auto& d : devs) {
    EXPECT_GT(d.sm_count, 0);
    EXPECT_GT(d.memory_bytes, 1e9);
  }
}
