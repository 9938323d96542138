// The 80% ranges (issue 41 item 4; model/uncertainty.hpp): each phase's evidence gives factors from its
// validation errors, phases of one evidence add, different evidence adds in quadrature; plans, target
// plans, capacity and reproduce carry them, and the target plans size at the pessimistic end.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "model/kernel_model.hpp"
#include "model/uncertainty.hpp"
#include "test_util.hpp"

namespace kvsim {
namespace {

PhaseResult curve_phase(PhaseKind kind, Ceiling c, double seconds) {
  PhaseResult r;
  r.phase = Phase{"p", kind, Device::gpu, ComputeUnit::simt, {}};
  r.seconds = seconds;
  r.ceiling = c;
  r.curve = true;
  return r;
}

struct Rig {
  Calibration cal;
  Machine m;
  Rig() {
    cal.calibrated = true;
    m.calibration = &cal;
  }
};

TEST(Uncertainty, ACurvePhaseTakesThePooledHeldOutErrors) {
  Rig r;
  const CurveErrors& c = published_curve_errors();
  ASSERT_GT(c.points, 10);  // scenarios/measurements/published-curve-errors.yaml
  const PhaseSpread s = phase_spread(curve_phase(PhaseKind::attention, Ceiling::hbm, 1e-3), r.m);
  EXPECT_EQ(s.evidence, Evidence::curve);
  EXPECT_DOUBLE_EQ(s.lo, std::min(1.0, 1 / (1 + c.p90)));
  EXPECT_DOUBLE_EQ(s.hi, std::max(1.0, 1 / (1 + c.p10)));
  EXPECT_LT(s.lo, 1);
  EXPECT_GT(s.hi, 1);
}

TEST(Uncertainty, OneEvidenceAddsAndDifferentEvidenceAddsInQuadrature) {
  Rig r;
  // Two phases on one curve: their deviations add, so the range is the single phase's factors.
  const std::vector<PhaseResult> same = {curve_phase(PhaseKind::attention, Ceiling::hbm, 1e-3),
                                         curve_phase(PhaseKind::attention, Ceiling::hbm, 1e-3)};
  const PhaseSpread s = phase_spread(same[0], r.m);
  const TimeRange a = time_range(same, 2e-3, r.m);
  EXPECT_NEAR(a.hi, 2e-3 * s.hi, 1e-15);
  EXPECT_NEAR(a.lo, 2e-3 * s.lo, 1e-15);
  // Two curves (two groups) of equal time: each deviation halves, and they add in quadrature.
  const std::vector<PhaseResult> two = {curve_phase(PhaseKind::attention, Ceiling::hbm, 1e-3),
                                        curve_phase(PhaseKind::gemm, Ceiling::hbm, 1e-3)};
  const TimeRange b = time_range(two, 2e-3, r.m);
  EXPECT_NEAR(b.hi - 2e-3, (a.hi - 2e-3) / std::sqrt(2.0), 1e-15);
  EXPECT_NEAR(2e-3 - b.lo, (2e-3 - a.lo) / std::sqrt(2.0), 1e-15);
  EXPECT_DOUBLE_EQ(b.share[size_t(Evidence::curve)], 1.0);
  // A simulated step shorter than the serial sum: the deviations scale with it.
  const TimeRange c = time_range(two, 1e-3, r.m);
  EXPECT_NEAR(c.hi - 1e-3, (b.hi - 2e-3) / 2, 1e-15);
}

TEST(Uncertainty, APhaseWithNoEvidenceRunsFromTheBoundToTheStatedWidth) {
  Rig r;
  PhaseResult p = curve_phase(PhaseKind::gemm, Ceiling::hbm, 1e-3);
  p.curve = false;  // a fallback constant
  const PhaseSpread s = phase_spread(p, r.m);
  EXPECT_EQ(s.evidence, Evidence::none);
  EXPECT_DOUBLE_EQ(s.lo, 1);
  EXPECT_DOUBLE_EQ(s.hi, kNoEvidenceHigh);
  // The bare roofline is the bound itself: its range is the point.
  r.cal.calibrated = false;
  EXPECT_DOUBLE_EQ(phase_spread(p, r.m).hi, 1);
  // A kernel model with no counted published point is no evidence either (gemv_scoring today).
  r.cal.calibrated = true;
  p.kernel = KernelModelId::gemv_scoring;
  ASSERT_EQ(kernel_model_check(KernelModelId::gemv_scoring).counted, 0);
  EXPECT_EQ(phase_spread(p, r.m).evidence, Evidence::none);
  p.kernel = KernelModelId::torch_topk;
  EXPECT_EQ(phase_spread(p, r.m).evidence, Evidence::kernel_model);
}

TEST(Uncertainty, TheHostLawRunsFromLinearToItsSlowFit) {
  Rig r;
  auto prof = std::make_shared<HostOpsProfile>();
  prof->threads = 2;
  prof->scaling = {.sigma = 0, .kappa = 2.24e-3, .source = "fit", .has_slow = true, .slow_sigma = 0.093, .slow_kappa = 0.02};
  HostOpsPhase ph;
  ph.name = "cpu_rerank";
  prof->phases.push_back(ph);
  HostOpsOnTarget t;
  t.profile = prof;
  r.m.host_ops = std::make_shared<const HostOpsOnTarget>(t);
  r.m.host_cores = 56;
  PhaseResult p;
  p.phase = Phase{"cpu_rerank", PhaseKind::host_kernel, Device::cpu, ComputeUnit::host, {}};
  p.seconds = 1e-3;
  const PhaseSpread s = phase_spread(p, r.m);
  EXPECT_EQ(s.evidence, Evidence::host_law);
  const double g = prof->scaling.gain(56, 2);
  EXPECT_DOUBLE_EQ(s.lo, g / 28);                               // linear: 28x the measured 2 threads
  EXPECT_DOUBLE_EQ(s.hi, g / prof->scaling.slow_gain(56, 2));  // the 6-core fit's peak team
  EXPECT_LT(s.lo, 1);
  EXPECT_GT(s.hi, 1);
}

TEST(Uncertainty, ThePlanPrintsItsRangesAndTheRooflineHasNone) {
  const auto j = test::run_kvsim("plan --format json");
  ASSERT_EQ(j.exit_code, 0) << j.out;
  const nlohmann::json doc = nlohmann::json::parse(j.out);
  for (const auto& r : doc["results"]) {
    if (!r["feasible"].get<bool>()) continue;
    EXPECT_LE(r["tpot_ms_low"].get<double>(), r["tpot_ms"].get<double>());
    EXPECT_GE(r["tpot_ms_high"].get<double>(), r["tpot_ms"].get<double>());
    EXPECT_LT(r["tpot_ms_low"].get<double>(), r["tpot_ms_high"].get<double>()) << r["policy"];
    EXPECT_LE(r["throughput_tok_s_low"].get<double>(), r["throughput_tok_s"].get<double>());
    EXPECT_EQ(r["max_batch_low"], r["memory"]["max_batch"]);
  }
  const auto b = test::run_kvsim("plan --calibration roofline --format json");
  ASSERT_EQ(b.exit_code, 0) << b.out;
  const nlohmann::json bound = nlohmann::json::parse(b.out);
  for (const auto& r : bound["results"])
    if (r["feasible"].get<bool>()) { EXPECT_DOUBLE_EQ(r["tpot_ms_high"].get<double>(), r["tpot_ms"].get<double>()); }
  const auto t = test::run_kvsim("plan --policy full --detail");
  EXPECT_NE(t.out.find("    80% range (docs/uncertainty.md): TPOT "), std::string::npos) << t.out;
}

TEST(Uncertainty, TargetPlansSizeAtThePessimisticEndUnlessAskedNotTo) {
  const std::string base = "plan --context 32768 --policy full --target-tpot 30 --format json";
  const auto p = test::run_kvsim(base);
  const auto e = test::run_kvsim(base + " --size-at estimate");
  ASSERT_EQ(p.exit_code, 0) << p.out;
  ASSERT_EQ(e.exit_code, 0) << e.out;
  const auto pa = nlohmann::json::parse(p.out)["answers"][0], ea = nlohmann::json::parse(e.out)["answers"][0];
  ASSERT_TRUE(pa["feasible"].get<bool>()) << pa.dump();
  EXPECT_EQ(pa["sized_at"], "pessimistic");
  EXPECT_EQ(ea["sized_at"], "estimate");
  EXPECT_LE(pa["estimate"]["tpot_s_high"].get<double>(), 30e-3);
  EXPECT_LE(ea["estimate"]["tpot_s"].get<double>(), 30e-3);
  // At the estimate the range's high end may pass the target; at the pessimistic end it may not.
  EXPECT_GE(ea["estimate"]["tpot_s_high"].get<double>(), ea["estimate"]["tpot_s"].get<double>());
  EXPECT_LE(pa["batch"].get<int64_t>(), ea["batch"].get<int64_t>());  // sizing for the worse case fits fewer
  const auto bad = test::run_kvsim("plan --target-tpot 30 --size-at optimistic");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.out.find("--size-at"), std::string::npos) << bad.out;
}

TEST(Uncertainty, AServingRunIsSimulatedAgainAtEachEndOfItsStepTimes) {
  const auto r = test::run_kvsim("serve --policy full --requests 200 --format json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto p = nlohmann::json::parse(r.out.substr(r.out.find('{')))["policies"][0];  // after the progress lines
  ASSERT_TRUE(p["range"].is_object()) << p.dump();
  const auto& g = p["range"];
  EXPECT_LT(g["step_time"]["decode_low"].get<double>(), 1);
  EXPECT_GT(g["step_time"]["decode_high"].get<double>(), 1);
  // Slower steps never make a run's tail shorter: the estimate's p99 TPOT lies between the ends'.
  const double lo = g["low_end"]["tpot_p99_s"], hi = g["high_end"]["tpot_p99_s"], est = p["tpot_s"]["p99"];
  EXPECT_LE(lo, est * (1 + 1e-9));
  EXPECT_GE(hi, est * (1 - 1e-9));
  EXPECT_LT(lo, hi);
  const auto t = test::run_kvsim("serve --policy full --requests 200");
  EXPECT_NE(t.out.find("80% range (docs/uncertainty.md): each run again"), std::string::npos) << t.out;
}

TEST(Uncertainty, CapacitySizesAtThePessimisticEndUnlessAskedNotTo) {
  const std::string base = "capacity --policy full --rate 2 --requests 200 --slo-tpot-p99 40ms --format json";
  const auto p = test::run_kvsim(base), e = test::run_kvsim(base + " --size-at estimate");
  ASSERT_EQ(p.exit_code, 0) << p.out;
  ASSERT_EQ(e.exit_code, 0) << e.out;
  const auto jp = nlohmann::json::parse(p.out.substr(p.out.find('{'))), je = nlohmann::json::parse(e.out.substr(e.out.find('{')));
  EXPECT_EQ(jp["sized_at"], "pessimistic");
  EXPECT_EQ(je["sized_at"], "estimate");
  const auto& a = jp["policies"][0];
  const auto& b = je["policies"][0];
  ASSERT_TRUE(a["found"].get<bool>() && b["found"].get<bool>()) << a.dump() << b.dump();
  EXPECT_GT(a["step_time_scale"]["decode"].get<double>(), 1);
  EXPECT_DOUBLE_EQ(b["step_time_scale"]["decode"].get<double>(), 1);
  EXPECT_GE(a["gpus"].get<int>(), b["gpus"].get<int>());  // slower steps never need fewer GPUs
  const auto t = test::run_kvsim("capacity --policy full --rate 2 --requests 200 --slo-tpot-p99 40ms");
  EXPECT_NE(t.out.find("sized at the pessimistic end of the plan's 80% range"), std::string::npos) << t.out;
}

TEST(Uncertainty, ReproduceRowsCarryARangeAroundTheEstimate) {
  const auto r = test::run_kvsim("reproduce ctkvr --format json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  int ranged = 0;
  for (const auto& row : nlohmann::json::parse(r.out)) {
    if (row["predicted_low"].is_null()) continue;
    ++ranged;
    EXPECT_LE(row["predicted_low"].get<double>(), row["predicted"].get<double>() * (1 + 1e-12)) << row["row"];
    EXPECT_GE(row["predicted_high"].get<double>(), row["predicted"].get<double>() * (1 - 1e-12)) << row["row"];
  }
  EXPECT_GT(ranged, 10);
}

}  // namespace
}  // namespace kvsim
