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

// The binding ceiling is named even when the launches win, and says whether a curve timed it: what
// the plan's unmeasured-phase flag reads (PlanResult::unmeasured_phases).
TEST(Roofline, NamesTheBindingCeilingAndWhetherACurveGaveIt) {
  Calibration cal;
  const Machine m = machine(cal);
  PhaseTime t = roofline(phase({.flops = 1e9, .hbm_bytes = 2e6, .launches = 10}, ComputeUnit::simt, PhaseKind::select), m);
  EXPECT_EQ(t.bound, Bound::latency);
  EXPECT_EQ(t.ceiling, Ceiling::simt);  // 1e9 / 60e12 = 16.7 us of compute against 1 us of HBM traffic
  EXPECT_FALSE(t.curve);
  t = roofline(phase({.flops = 1e6, .hbm_bytes = 4e9}, ComputeUnit::simt, PhaseKind::select), m);
  EXPECT_EQ(t.ceiling, Ceiling::hbm);
  EXPECT_FALSE(t.curve);
  EXPECT_EQ(roofline(phase({.launches = 3}), m).ceiling, Ceiling::count);  // no work on any ceiling
  EfficiencyCurve cv;
  cv.kind = PhaseKind::select;
  cv.ceiling = Ceiling::hbm;
  cv.points = {{1e3, 0.5}, {1e12, 0.5}};
  cal.curves.push_back(cv);
  t = roofline(phase({.flops = 1e6, .hbm_bytes = 4e9}, ComputeUnit::simt, PhaseKind::select), m);
  EXPECT_EQ(t.ceiling, Ceiling::hbm);
  EXPECT_TRUE(t.curve);
  EXPECT_DOUBLE_EQ(t.seconds, 4e-3);
  // The curve is for hbm only: a compute-bound select is still at its constant.
  t = roofline(phase({.flops = 6e12, .hbm_bytes = 1e6}, ComputeUnit::simt, PhaseKind::select), m);
  EXPECT_EQ(t.ceiling, Ceiling::simt);
  EXPECT_FALSE(t.curve);
}

TEST(Roofline, EfficienciesScaleOnlyTheirPhaseKind) {
  Calibration cal;
  cal.per_kind[size_t(PhaseKind::attention)].of[size_t(Ceiling::hbm)] = 0.5;
  const Machine m = machine(cal);
  const Work w{.hbm_bytes = 2e9};
  EXPECT_DOUBLE_EQ(roofline(phase(w, ComputeUnit::tensor, PhaseKind::attention), m).seconds, 2e-3);
  EXPECT_DOUBLE_EQ(roofline(phase(w, ComputeUnit::tensor, PhaseKind::gemm), m).seconds, 1e-3);
}

namespace {
// A host of `cores` cores at 10 GFLOP/s and one core's 20 GB/s each, 200 GB/s of DRAM in all, with
// measured call and region costs (model/calibration.hpp, HostThreads).
Machine host_machine(const Calibration& cal, double cores, double call_s, double region_s) {
  Machine m = machine(cal);
  m.host_cores = cores;
  m.host_compute = cores * 10e9;
  m.dram = 200e9;
  m.host_threads.call_s = call_s;
  m.host_threads.region_s = region_s;
  m.host_threads.core_dram = 20e9;
  return m;
}
Phase host_phase(Work w, double lanes) {
  Phase p{"h", PhaseKind::host_kernel, Device::cpu, ComputeUnit::host, w};
  p.stream = Stream::host;
  p.lanes = float(lanes);
  return p;
}
}  // namespace

// The same 1 MB read from DRAM by one thread: as 100,000 calls it is the calls that cost (1 us each),
// as one call the bytes (1 MB at one core's 20 GB/s = 50 us).
TEST(Roofline, AHostPhaseOfManySmallCallsIsCallBoundAndOneCallIsBandwidthBound) {
  Calibration cal;
  const Machine m = host_machine(cal, 8, 1e-6, 0);
  const PhaseTime many = roofline(host_phase({.dram_bytes = 1e6, .launches = 1e5}, 1), m);
  EXPECT_EQ(many.bound, Bound::latency);
  EXPECT_DOUBLE_EQ(many.seconds, 50e-6 + 0.1);
  const PhaseTime one = roofline(host_phase({.dram_bytes = 1e6, .launches = 1}, 1), m);
  EXPECT_EQ(one.bound, Bound::dram);
  EXPECT_DOUBLE_EQ(one.seconds, 50e-6 + 1e-6);
  // Spread over 8 independent pieces, the calls share out over 8 threads and so does the bandwidth.
  const PhaseTime spread = roofline(host_phase({.dram_bytes = 1e6, .launches = 1e5}, 8), m);
  EXPECT_DOUBLE_EQ(spread.seconds, 1e6 / (8 * 20e9) + 1e5 * 1e-6 / 8);
}

// Per-head host work (56 pieces, one per sequence and KV head) runs on 56 threads of a 56-core host and
// on 2 of a 2-core one; with 8 pieces the big host uses 8 cores, not 56. Each parallel region (one per
// layer instance) costs its fork and join.
TEST(Roofline, PerHeadHostWorkRunsInParallelOnAManyCoreHostAndNotOnTwoCores) {
  Calibration cal;
  const Machine big = host_machine(cal, 56, 0, 5e-6), small = host_machine(cal, 2, 0, 5e-6);
  const Work w{.flops = 56e9};
  EXPECT_DOUBLE_EQ(roofline(host_phase(w, 56), big).seconds, 56e9 / (56 * 10e9) + 5e-6);
  EXPECT_DOUBLE_EQ(roofline(host_phase(w, 56), small).seconds, 56e9 / (2 * 10e9) + 5e-6);
  EXPECT_DOUBLE_EQ(roofline(host_phase(w, 8), big).seconds, 56e9 / (8 * 10e9) + 5e-6);
  EXPECT_EQ(host_limits(host_phase(w, 8), big).threads, 8);
  // One piece: one thread, and no parallel region.
  EXPECT_DOUBLE_EQ(roofline(host_phase(w, 1), big).seconds, 56e9 / 10e9);
  // A phase that declares no pieces runs on every core, as host phases always did.
  EXPECT_DOUBLE_EQ(roofline(host_phase(w, 0), big).seconds, 56e9 / (56 * 10e9));
  // The DRAM side: 56 cores x 20 GB/s would exceed the host's 200 GB/s, which caps it.
  EXPECT_DOUBLE_EQ(host_limits(host_phase({.dram_bytes = 1}, 56), big).dram, 200e9);
  EXPECT_DOUBLE_EQ(host_limits(host_phase({.dram_bytes = 1}, 4), big).dram, 80e9);
}

// PCIe under load in both directions (GpuSpec::h2d_under_d2h, d2h_under_h2d): 0 means not given, so a
// machine keeps the one-way bandwidth for it; a value given is used as is.
TEST(Roofline, AnUnsetUnderLoadBandwidthIsTheOneWayOne) {
  const Calibration cal;
  kvsim::GpuSpec g = kvsim::test::gpu("h100-sxm");
  const kvsim::HostSpec h = kvsim::test::host("xeon-w9-3495x");
  g.h2d_under_d2h = 0, g.d2h_under_h2d = 0;
  Machine m = make_machine(g, h, kvsim::DType::bf16, kvsim::DType::bf16, true, cal);
  EXPECT_DOUBLE_EQ(m.h2d_duplex, g.h2d_pinned);
  EXPECT_DOUBLE_EQ(m.d2h_duplex, g.d2h_pinned);
  g.h2d_under_d2h = 0.5 * g.h2d_pinned, g.d2h_under_h2d = 0.25 * g.d2h_pinned;
  m = make_machine(g, h, kvsim::DType::bf16, kvsim::DType::bf16, true, cal);
  EXPECT_DOUBLE_EQ(m.h2d_duplex, 0.5 * g.h2d_pinned);
  EXPECT_DOUBLE_EQ(m.d2h_duplex, 0.25 * g.d2h_pinned);
}
