// The roofline of a single phase: the largest term wins, efficiencies scale ceilings, launches add.
#include <gtest/gtest.h>

#include "model/roofline.hpp"
#include "test_util.hpp"

using namespace kvsim;

namespace {
Machine machine(const Calibration& cal) {
  Machine m;
  m.tensor = 1000e12;
  m.simt = 60e12;
  m.host_compute = 1e12;
  m.hbm = 2e12;
  m.dram = 200e9;
  m.h2d = 25e9;
  m.d2h = 50e9;
  m.link = 400e9;
  m.kernel_latency = 2e-6;
  m.calibration = &cal;
  return m;
}
Phase phase(Work w, ComputeUnit u = ComputeUnit::tensor, PhaseKind k = PhaseKind::gemm) {
  return Phase{"p", k, Device::gpu, u, w};
}
}  // namespace

TEST(Roofline, LargestTermWinsAndNamesTheBound) {
  Calibration cal;
  const Machine m = machine(cal);
  EXPECT_EQ(roofline(phase({.flops = 1e12, .hbm_bytes = 1e9}), m).bound, Bound::compute);
  EXPECT_DOUBLE_EQ(roofline(phase({.flops = 1e12, .hbm_bytes = 1e9}), m).seconds, 1e-3);
  EXPECT_EQ(roofline(phase({.flops = 1e9, .hbm_bytes = 4e9}), m).bound, Bound::hbm);
  EXPECT_DOUBLE_EQ(roofline(phase({.flops = 1e9, .hbm_bytes = 4e9}), m).seconds, 2e-3);
  EXPECT_EQ(roofline(phase({.h2d_bytes = 1e9, .d2h_bytes = 1e9}), m).bound, Bound::h2d);
  EXPECT_EQ(roofline(phase({.dram_bytes = 1e9}), m).bound, Bound::dram);
  EXPECT_EQ(roofline(phase({.link_bytes = 1e9}), m).bound, Bound::interconnect);
  EXPECT_DOUBLE_EQ(roofline(phase({.flops = 6e9}, ComputeUnit::simt), m).seconds, 1e-4);
  EXPECT_DOUBLE_EQ(roofline(phase({.flops = 1e9}, ComputeUnit::host), m).seconds, 1e-3);
}

TEST(Roofline, LaunchLatencyAddsAndCanDominate) {
  Calibration cal;
  const Machine m = machine(cal);
  const PhaseTime t = roofline(phase({.hbm_bytes = 2e6, .launches = 10}), m);  // 1 us of traffic, 20 us of launches
  EXPECT_DOUBLE_EQ(t.seconds, 1e-6 + 20e-6);
  EXPECT_EQ(t.bound, Bound::latency);
}

TEST(Roofline, EfficienciesScaleOnlyTheirPhaseKind) {
  Calibration cal;
  cal.per_kind[size_t(PhaseKind::attention)].of[size_t(Ceiling::hbm)] = 0.5;
  const Machine m = machine(cal);
  const Work w{.hbm_bytes = 2e9};
  EXPECT_DOUBLE_EQ(roofline(phase(w, ComputeUnit::tensor, PhaseKind::attention), m).seconds, 2e-3);
  EXPECT_DOUBLE_EQ(roofline(phase(w, ComputeUnit::tensor, PhaseKind::gemm), m).seconds, 1e-3);
}
