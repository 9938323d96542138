// Shrunk cases the properties found, kept as plain tests: each is the minimal scenario RapidCheck
// reduced a failure to, with what was wrong and what is right now (docs/robustness.md, "Properties").
#include <gtest/gtest.h>

#include "model/kernel_model.hpp"

#include "policies/registry.hpp"
#include "tests/properties/plan_helpers.hpp"

using namespace kvsim;
using namespace kvsim::props;

namespace {
ScenarioSpec ctkvr_on_h100_nvl(const std::string& calibration) {
  return {.gpu = "h100-nvl", .host = "ci-2core", .model = "yi-9b", .calibration = calibration,
          .weight_dtype = "bf16", .kv_dtype = "fp8", .context = 1024, .output = 1, .batch = 0,
          .policy = "ctkvr"};
}
}  // namespace

// RooflineBound.CalibrationRooflineEqualsThePrintedBound, shrunk. The bound printed beside a calibrated
// estimate kept the calibration's measured host call costs (HostThreads: call, region, per-core DRAM),
// so CTKVR's cpu_rerank and cpu_attention cost 3.04 ms each in the "bound": TPOT 15.355 ms, against
// 9.285 ms (now 9.32) from `--calibration roofline`, which has none. The bound now drops them too.
TEST(PropertyRegressions, PrintedBoundEqualsCalibrationRooflineWithHostPhases) {
  const auto cal = loaded(ctkvr_on_h100_nvl("auto")), roof = loaded(ctkvr_on_h100_nvl("roofline"));
  const Policy& full = *policy_catalog().find("full");
  const auto a = plan_scenario(cal->s, cal->d, full), b = plan_scenario(roof->s, roof->d, full);
  ASSERT_EQ(a.size(), 1u);
  ASSERT_TRUE(a[0].feasible && b[0].feasible && a[0].has_bound);
  EXPECT_EQ(a[0].batch, b[0].batch);
  EXPECT_NEAR(a[0].bound_tpot_s, b[0].tpot_s, 1e-12);
  EXPECT_NEAR(a[0].bound_ttft_s, b[0].ttft_s, 1e-12);
  // 9.285 ms until probe_dedup read every query head's cosines, not one row per KV head (yi-9b's group
  // of 8; docs/validation/phase-bytes.md, rule 3).
  EXPECT_NEAR(b[0].tpot_s, 9.3205e-3, 0.0005e-3);
  EXPECT_LT(a[0].bound_tpot_s, a[0].tpot_s);
}

// Monotonic.InBatch, shrunk: the exception it states. Under the published curves, SEKV's step on an
// H20 (Qwen2-7B, TP 2) gets faster from batch 37 to 38, where the MLP GEMM
// crosses the GPU's ridge and reads the tensor curve instead of the hbm curve (docs/cost-model.md).
// The roofline has no curves, and there the step grows across the same ridge.
TEST(PropertyRegressions, TheRidgeExceptionIsTheCurvesAlone) {
  ScenarioSpec spec{.gpu = "h20", .host = "ci-2core", .model = "qwen2-7b", .calibration = "auto",
                    .weight_dtype = "bf16", .kv_dtype = "bf16", .tp = 2, .context = 1024, .output = 1, .batch = 37,
                    .implementation = -1, .policy = "sekv"};
  for (const char* cal : {"auto", "roofline"}) {
    spec.calibration = cal;
    const auto l = loaded(spec);
    const PlanResult a = l->evaluate_at(1024, 37), b = l->evaluate_at(1024, 38);
    ASSERT_TRUE(a.feasible && b.feasible);
    const auto mlp = [](const PlanResult& r) {
      for (const PhaseResult& p : r.decode)
        if (p.phase.name == "mlp") return p;
      return PhaseResult{};
    };
    EXPECT_EQ(mlp(a).ceiling, Ceiling::hbm) << cal;
    EXPECT_EQ(mlp(b).ceiling, Ceiling::tensor) << cal;
    if (std::string(cal) == "auto") {
      EXPECT_LT(mlp(b).seconds, mlp(a).seconds);  // the exception
    } else {
      EXPECT_GE(mlp(b).seconds, mlp(a).seconds);
      EXPECT_GE(b.tpot_s, a.tpot_s);
    }
  }
}

// RooflineBound.CalibrationRooflineEqualsThePrintedBound, shrunk (3000 cases, seed 777): the exception
// it states. The calibrated step undercuts the roofline's by 0.001 %: its host phases' call costs
// (1.43 ms each for cpu_rerank and cpu_attention) delay them, and the phases that share PCIe and the
// GPU with them then finish earlier. The same with the full simulation (no periodic shortcut): a
// scheduling anomaly of the shared resources, not a shortcut's error.
TEST(PropertyRegressions, ASlowerHostPhaseCanShortenTheSimulatedStepALittle) {
  // Found and pinned before kernel models priced the GPU phases (model/kernel_model.hpp): with them the
  // calibrated step is longer than the bound here. The anomaly is the simulator's, so it is pinned with
  // the models off (restored after).
  struct ModelsOff {
    bool was = kernel_models_on();
    ModelsOff() { set_kernel_models(false); }
    ~ModelsOff() { set_kernel_models(was); }
  } off;
  ScenarioSpec spec{.gpu = "v100-32g", .host = "xeon-w9-3495x", .model = "mistral-7b", .calibration = "auto",
                    .weight_dtype = "fp32", .kv_dtype = "fp8", .tp = 2, .context = 1795, .output = 10, .batch = 0,
                    .implementation = -1, .policy = "ctkvr", .params = {{"centroids", "256"}, {"budget_tokens", "256"}}};
  const auto cal = loaded(spec);
  spec.calibration = "roofline";
  const auto roof = loaded(spec);
  const PlanResult a = cal->evaluate_at(1795, 0), b = roof->evaluate_at(1795, 0);
  ASSERT_TRUE(a.feasible && b.feasible && a.simulated);
  EXPECT_EQ(a.batch, 90);
  EXPECT_GT(a.decode_serial_s, b.decode_serial_s);  // more work in the phases alone
  // The anomaly itself (a shorter step than the bound's) showed with the host calibration measured on
  // 2026-11-25; the one measured again on 2026-12-07 without the clamp (docs/validation/cpu.md) gives this
  // point other call costs, and its step is then longer than the bound's. What the property allows stays:
  EXPECT_GT(a.tpot_s, b.tpot_s * (1 - 1e-3));  // never shorter than the bound by more than the exception
}
