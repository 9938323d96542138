// A weight GEMM phase reads the efficiency curve of its regime (issue 27 item 3, model/roofline.hpp
// phase_efficiency): below the GPU's ridge (FLOPs per HBM byte < tensor peak / HBM bandwidth) the hbm
// curve, at or above it the tensor curve, the rule `kvsim calibrate published` files a GEMM point by
// (validate/published.cpp). The other ceiling takes the calibration's constant: before, a decode GEMM
// of 3 rows read the tensor curve, fitted to square prefill GEMMs, at its weight bytes and was flagged
// "outside the calibrated range" for a ceiling its time does not rest on.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "model/resources.hpp"
#include "model/roofline.hpp"
#include "model/transformer.hpp"
#include "test_util.hpp"

namespace kvsim {
namespace {

// A GEMM of m rows through a k x n bf16 weight, the way model/transformer.cpp writes one.
Phase gemm(double m, double k, double n) {
  Phase p{"g", PhaseKind::gemm, Device::gpu, ComputeUnit::tensor, {}};
  p.work.flops = 2 * m * k * n;
  p.work.hbm_bytes = 2 * (k * n + m * (k + n));
  p.work.launches = 1;
  return p;
}

EfficiencyCurve curve(Ceiling c, double lo, double hi, double e_lo, double e_hi) {
  EfficiencyCurve cv;
  cv.kind = PhaseKind::gemm;
  cv.ceiling = c;
  cv.x = CurveVariable::bytes;
  cv.points = {{lo, e_lo}, {hi, e_hi}};
  return cv;
}

struct Rig {
  GpuSpec gpu = test::gpu("h100-sxm");
  HostSpec host = test::host(gpu.default_host);
  Calibration cal;
  Machine m;
  Rig() {
    // hbm: decode GEMMs of 10-100 MB; tensor: prefill GEMMs of 0.1-10 GB (disjoint on purpose).
    cal.curves.push_back(curve(Ceiling::hbm, 1e7, 1e8, 0.6, 0.8));
    cal.curves.push_back(curve(Ceiling::tensor, 1e8, 1e10, 0.5, 0.7));
    cal.calibrated = true;
    m = make_machine(gpu, host, DType::bf16, DType::bf16, true, cal);
  }
};

TEST(GemmRegime, ADecodeGemmReadsTheHbmCurveAndTheTensorConstant) {
  Rig r;
  const Phase p = gemm(3, 4096, 4096);  // 33.6 MB, 3 FLOPs per byte: far below the ridge (~295)
  ASSERT_LT(p.work.flops / p.work.hbm_bytes, r.m.tensor / r.m.hbm);
  bool outside = false;
  const double e_hbm = phase_efficiency(p, Ceiling::hbm, r.m, &outside);
  EXPECT_NEAR(e_hbm, r.cal.efficiency(p, Ceiling::hbm, p.work.hbm_bytes), 1e-12);
  EXPECT_GT(e_hbm, 0.6);
  EXPECT_LT(e_hbm, 0.8);
  // The tensor curve (0.1-10 GB) would be read below its range at 33.6 MB: it is not read at all.
  EXPECT_DOUBLE_EQ(phase_efficiency(p, Ceiling::tensor, r.m, &outside), 1.0);
  EXPECT_FALSE(outside);
  const PhaseTime t = roofline(p, r.m);
  EXPECT_FALSE(t.extrapolated);
  EXPECT_EQ(t.bound, Bound::hbm);
  EXPECT_NEAR(t.seconds, p.work.hbm_bytes / (r.m.hbm * e_hbm) + r.m.kernel_latency, 1e-15);
  // The simulator divides by the same efficiencies.
  const sim::SimPhase s = sim::to_sim_phase(p, r.m);
  EXPECT_NEAR(s.amount[size_t(sim::Resource::hbm)], p.work.hbm_bytes / e_hbm, 1e-3);
  EXPECT_NEAR(s.amount[size_t(sim::Resource::tensor)], p.work.flops, 1e-3);
}

TEST(GemmRegime, APrefillGemmReadsTheTensorCurveAndTheHbmConstant) {
  Rig r;
  const Phase p = gemm(8192, 4096, 14336);  // 0.43 GB, ~2200 FLOPs per byte: above the ridge
  ASSERT_GT(p.work.flops / p.work.hbm_bytes, r.m.tensor / r.m.hbm);
  bool outside = false;
  const double e_t = phase_efficiency(p, Ceiling::tensor, r.m, &outside);
  EXPECT_NEAR(e_t, r.cal.efficiency(p, Ceiling::tensor, p.work.hbm_bytes), 1e-12);
  // The hbm curve (10-100 MB) is not read above its range.
  EXPECT_DOUBLE_EQ(phase_efficiency(p, Ceiling::hbm, r.m, &outside), 1.0);
  EXPECT_FALSE(outside);
  const PhaseTime t = roofline(p, r.m);
  EXPECT_FALSE(t.extrapolated);
  EXPECT_EQ(t.bound, Bound::compute);
  EXPECT_NEAR(t.seconds, p.work.flops / (r.m.tensor * e_t) + r.m.kernel_latency, 1e-12);
}

TEST(GemmRegime, TheRegimesCurveOutsideItsRangeIsStillFlagged) {
  Rig r;
  const Phase lm_head = gemm(3, 4096, 128256);  // 1.05 GB of weights, streamed: above the hbm curve
  EXPECT_TRUE(roofline(lm_head, r.m).extrapolated);
  const Phase small_prefill = gemm(2048, 1024, 1024);  // 10 MB, above the ridge: below the tensor curve
  ASSERT_GT(small_prefill.work.flops / small_prefill.work.hbm_bytes, r.m.tensor / r.m.hbm);
  EXPECT_TRUE(roofline(small_prefill, r.m).extrapolated);
}

TEST(GemmRegime, OtherKindsStillReadEveryCurve) {
  Rig r;
  EfficiencyCurve att = curve(Ceiling::tensor, 1e8, 1e10, 0.5, 0.7);
  att.kind = PhaseKind::attention;
  r.cal.curves.push_back(att);
  Phase a = gemm(3, 4096, 4096);
  a.kind = PhaseKind::attention;
  bool outside = false;
  EXPECT_DOUBLE_EQ(phase_efficiency(a, Ceiling::tensor, r.m, &outside), 0.5);  // below: the end value
  EXPECT_TRUE(outside);
}

// The default scenario (Llama-3.1-8B on h100-sxm at 128K, calibrated from the published points): the
// prefill GEMMs are read at one GEMM's bytes, inside the tensor curve's measured range.
TEST(GemmRegime, DefaultPlanPrefillGemmIsInsideTheCalibratedRange) {
  const auto r = test::run_kvsim("plan --policy full --format json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out.substr(r.out.find('{')));
  ASSERT_FALSE(j["results"].empty());
  for (const auto& res : j["results"])
    for (const auto& name : res["extrapolated_phases"]) {
      EXPECT_NE(name.get<std::string>(), "prefill_gemm");
      EXPECT_NE(name.get<std::string>(), "mlp");
    }
}

}  // namespace
}  // namespace kvsim
