// The CUDA runtime query builds wherever nvcc exists and answers sensibly: the devices it finds, or,
// without one, the reason (the answer `kvsim validate --device cuda` prints).
#include <gtest/gtest.h>

#include <cstdio>

#include "kernels/cuda_device.hpp"

TEST(CudaDevice, ReportsDevicesOrSaysWhyNot) {
  std::string why;
  const auto devs = kvsim::cuda::devices(&why);
  if (devs.empty()) {
    EXPECT_FALSE(why.empty()) << "no device and no reason given";
    std::printf("no GPU: %s\n", why.c_str());
    return;
  }
  for (const auto& d : devs) {
    EXPECT_GT(d.sm_count, 0);
    EXPECT_GT(d.memory_bytes, 1e9);
  }
}
