// Efficiency curves in calibration files (interpolation, extrapolation warning, loader errors) and
// `kvsim validate` end to end: --quick writes a file the planner loads. No timing is asserted here.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "kernels/cuda_device.hpp"
#include "core/error.hpp"
#include "model/roofline.hpp"
#include "test_util.hpp"

using namespace kvsim;

namespace {
Calibration from_text(const std::string& text) {
  return load_calibration(YamlMap(load_yaml_string(text, "cal.yaml"), "cal.yaml", ""));
}
std::string load_error(const std::string& text) {
  try {
    from_text(text);
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}
const char* kHead = "schema: kvsim.calibration/1\nname: t\n";

Phase host_phase(std::string_view name, double flops, double dram, double run_bytes = 0) {
  Phase p{name, PhaseKind::host_kernel, Device::cpu, ComputeUnit::host, {}};
  p.work.flops = flops;
  p.work.dram_bytes = dram;
  p.run_bytes = run_bytes;
  return p;
}
}  // namespace

TEST(CalibrationCurve, InterpolatesLinearlyInLogXAndClampsOutside) {
  const Calibration c = from_text(std::string(kHead) +
                                  "curves:\n  - {kind: host_kernel, ceiling: dram, x: bytes, "
                                  "points: [[100, 0.2], [10000, 0.6], [1000000, 0.7]]}\n");
  ASSERT_EQ(c.curves.size(), 1u);
  EXPECT_TRUE(c.calibrated);
  const EfficiencyCurve& cv = c.curves[0];
  bool outside = true;
  EXPECT_NEAR(cv.at(1000, &outside), 0.4, 1e-12);  // halfway in log x between 100 and 10^4
  EXPECT_FALSE(outside);
  EXPECT_NEAR(cv.at(100000, &outside), 0.65, 1e-12);
  EXPECT_DOUBLE_EQ(cv.at(10000, &outside), 0.6);
  EXPECT_DOUBLE_EQ(cv.at(10, &outside), 0.2);
  EXPECT_TRUE(outside);
  EXPECT_DOUBLE_EQ(cv.at(1e9, &outside), 0.7);
  EXPECT_TRUE(outside);
}

TEST(CalibrationCurve, PhaseCurveBeatsKindCurveBeatsConstantAndRooflineUsesIt) {
  const Calibration c = from_text(std::string(kHead) +
                                  "phases: {host_kernel: {dram: 0.8}}\n"
                                  "gather_half_run_bytes: {dram: 64}\n"
                                  "curves:\n"
                                  "  - {kind: host_kernel, ceiling: dram, x: bytes, points: [[1, 0.5], [1e12, 0.5]]}\n"
                                  "  - {kind: host_kernel, phase: cpu_rerank, ceiling: dram, x: bytes, "
                                  "points: [[1, 0.25], [1e12, 0.25]]}\n"
                                  "  - {kind: gather, ceiling: dram, x: run_bytes, points: [[64, 0.1], [4096, 0.9]]}\n");
  Machine m;
  m.dram = 1e9;
  m.host_compute = 1e12;
  m.calibration = &c;
  // The named curve, with the gather penalty on top (512 / (512 + 64)).
  const Phase rr = host_phase("cpu_rerank", 0, 1e6, 512);
  EXPECT_NEAR(roofline(rr, m).seconds, 1e6 / (1e9 * 0.25 * 512.0 / 576.0), 1e-12);
  // Another host phase: the kind-wide curve (no runs, no penalty).
  EXPECT_NEAR(roofline(host_phase("cpu_attention", 0, 1e6), m).seconds, 1e6 / (1e9 * 0.5), 1e-12);
  // A run_bytes curve replaces the penalty: at 512 B, log-x interpolation between 64 and 4096.
  Phase g{"staging", PhaseKind::gather, Device::cpu, ComputeUnit::host, {}};
  g.work.dram_bytes = 1e6;
  g.run_bytes = 512;
  EXPECT_NEAR(c.efficiency(g, Ceiling::dram, 1e6), 0.1 + 0.8 * 0.5, 1e-12);
  // No curve for this kind: the constant with the penalty.
  Phase s{"score", PhaseKind::select, Device::cpu, ComputeUnit::host, {}};
  s.run_bytes = 64;
  EXPECT_NEAR(c.efficiency(s, Ceiling::dram, 1e6), 1.0 * 0.5, 1e-12);
}

TEST(CalibrationCurve, SaysWhenItExtrapolates) {
  const Calibration c = from_text(std::string(kHead) +
                                  "curves:\n  - {kind: host_kernel, phase: cpu_rerank, ceiling: dram, x: bytes, "
                                  "points: [[1000, 0.3], [2000, 0.4]]}\n");
  const Phase p = host_phase("cpu_rerank", 0, 1e6);
  testing::internal::CaptureStderr();
  bool outside = false;
  EXPECT_NEAR(c.efficiency(p, Ceiling::dram, 1500, &outside), 0.3 + 0.1 * std::log(1.5) / std::log(2.0), 1e-12);
  EXPECT_FALSE(outside);  // inside the measured range
  EXPECT_DOUBLE_EQ(c.efficiency(p, Ceiling::dram, 1e6, &outside), 0.4);  // above: the end value
  EXPECT_TRUE(outside);
  outside = false;
  EXPECT_DOUBLE_EQ(c.efficiency(p, Ceiling::dram, 10, &outside), 0.3);  // below: the first value
  EXPECT_TRUE(outside);
  const Calibration copy = c;
  outside = false;
  EXPECT_DOUBLE_EQ(copy.efficiency(p, Ceiling::dram, 1e7, &outside), 0.4);
  EXPECT_TRUE(outside);
  // The answer carries the flag (PhaseResult::extrapolated); nothing goes to stderr.
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
}

TEST(CalibrationCurve, ConstantFilesStillLoad) {
  const Calibration c = load_calibration_file(resolve(LibraryKind::calibration, "roofline", "", 0, ""));
  EXPECT_TRUE(c.curves.empty());
  EXPECT_FALSE(c.calibrated);
  EXPECT_EQ(c.half_run_bytes[size_t(Ceiling::dram)], 64);
}

TEST(CalibrationCurve, LoaderErrorsNameTheFieldAndValue) {
  const std::string curve = "curves:\n  - {kind: host_kernel, ceiling: dram, x: bytes, points: ";
  auto err = load_error(std::string(kHead) + curve + "[[100, 0.5], [50, 0.6]]}\n");
  EXPECT_NE(err.find("curves[0].points[1]"), std::string::npos) << err;
  EXPECT_NE(err.find("x = 50"), std::string::npos) << err;
  err = load_error(std::string(kHead) + curve + "[[100, 1.5]]}\n");
  EXPECT_NE(err.find("curves[0].points[0].efficiency"), std::string::npos) << err;
  EXPECT_NE(err.find("1.5"), std::string::npos) << err;
  err = load_error(std::string(kHead) + curve + "[[0, 0.5]]}\n");
  EXPECT_NE(err.find("points[0].x"), std::string::npos) << err;
  err = load_error(std::string(kHead) + curve + "[]}\n");
  EXPECT_NE(err.find("curves[0].points"), std::string::npos) << err;
  err = load_error(std::string(kHead) + curve + "[[1, 0.5, 3]]}\n");
  EXPECT_NE(err.find("pair"), std::string::npos) << err;
  err = load_error(std::string(kHead) + "curves:\n  - {kind: host_kernel, ceiling: dram, x: lenght, points: [[1, 1]]}\n");
  EXPECT_NE(err.find("curves[0].x"), std::string::npos) << err;
  EXPECT_NE(err.find("lenght"), std::string::npos) << err;
  err = load_error(std::string(kHead) + "curves:\n  - {kind: hostkernel, ceiling: dram, x: bytes, points: [[1, 1]]}\n");
  EXPECT_NE(err.find("curves[0].kind"), std::string::npos) << err;
  err = load_error(std::string(kHead) + "curves:\n  - {kind: gather, ceiling: dram, x: bytes, points: [[1, 1]]}\n"
                   "  - {kind: gather, ceiling: dram, x: run_bytes, points: [[1, 1]]}\n");
  EXPECT_NE(err.find("curves[1]"), std::string::npos) << err;
  EXPECT_NE(err.find("second curve"), std::string::npos) << err;
  err = load_error(std::string(kHead) + "curves:\n  - {kind: gather, ceiling: dram, x: bytes, pionts: [[1, 1]]}\n");
  EXPECT_NE(err.find("points"), std::string::npos) << err;
  err = load_error(std::string(kHead) + "curves: {kind: gather}\n");
  EXPECT_NE(err.find("must be a list"), std::string::npos) << err;
}

TEST(ValidateCli, QuickRunWritesACalibrationThePlannerLoads) {
  const std::string cal = std::string(::testing::TempDir()) + "validate_quick.yaml";
  std::filesystem::remove(cal);
  const auto r = test::run_kvsim("validate --device cpu --quick --host ci-2core --format json --out '" + cal + "'");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out.substr(r.out.find("\n{") + 1));
  EXPECT_EQ(j["device"], "cpu");
  EXPECT_GE(j["phases"].size(), 15u);
  for (const auto& p : j["phases"]) {
    EXPECT_GT(p["efficiency_max"].get<double>(), 0) << p["phase"];
    EXPECT_TRUE(p.contains("median_abs_error_calibrated")) << p["phase"];
  }
  const Calibration c = load_calibration_file(cal);
  EXPECT_TRUE(c.calibrated);
  bool rerank = false, gather = false;
  for (const auto& cv : c.curves) {
    rerank |= cv.phase == "cpu_rerank" && cv.ceiling == Ceiling::dram;
    gather |= cv.kind == PhaseKind::gather && cv.phase.empty() && cv.x == CurveVariable::run_bytes;
    for (const auto& [x, e] : cv.points) EXPECT_TRUE(x > 0 && e > 0 && e <= 1) << cv.phase;
  }
  EXPECT_TRUE(rerank);
  EXPECT_TRUE(gather);

  // The planner takes it: CTKVR's CPU phases slow down against the roofline (or stay, where a kernel
  // met its ceiling).
  const auto base = test::run_kvsim("plan --policy ctkvr --context 32768 --batch 1 --format json --calibration roofline");
  const auto calibrated =
      test::run_kvsim("plan --policy ctkvr --context 32768 --batch 1 --format json --calibration '" + cal + "'");
  ASSERT_EQ(base.exit_code, 0) << base.out;
  ASSERT_EQ(calibrated.exit_code, 0) << calibrated.out;
  auto phase_ms = [](const std::string& out, const std::string& name) {
    const auto j = nlohmann::json::parse(out.substr(out.find('{')));
    for (const auto& p : j["results"][0]["phases"])
      if (p["name"] == name) return p["time_ms"].get<double>();
    return -1.0;
  };
  const double before = phase_ms(base.out, "cpu_rerank"), after = phase_ms(calibrated.out, "cpu_rerank");
  ASSERT_GT(before, 0) << base.out;
  EXPECT_GE(after, before * (1 - 1e-9));
}

TEST(ValidateCli, PlanFlagsAPhaseWhoseCurveIsExtrapolated) {
  const std::string cal = test::write_temp("narrow_curve.yaml",
                                           std::string(kHead) +
                                               "curves:\n  - {kind: host_kernel, phase: cpu_rerank, ceiling: dram, "
                                               "x: bytes, points: [[1000, 0.3], [2000, 0.4]]}\n");
  const auto r = test::run_kvsim("plan --policy ctkvr --context 32768,65536 --format json --calibration '" + cal + "'");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  // The answer itself says so for every result whose phase read the curve outside its range (and
  // nothing is printed besides the answer).
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["results"].size(), 2u);
  for (const auto& res : j["results"]) {
    bool flagged = false;
    for (const auto& n : res["extrapolated_phases"]) flagged |= n == "cpu_rerank";
    EXPECT_TRUE(flagged) << res.dump();
    for (const auto& ph : res["phases"])
      if (ph["name"] == "cpu_rerank") { EXPECT_TRUE(ph["extrapolated"].get<bool>()); }
  }
}

// A GPU phase whose binding ceiling runs at a constant (no curve, no measured constant) is listed as
// unmeasured with its fallback and where it came from; a curve for it, or a measured constant, takes
// it off the list; the uncalibrated roofline lists nothing (its whole answer is the bound).
namespace {
nlohmann::json unmeasured_of(const std::string& yaml, const std::string& file) {
  const std::string cal = test::write_temp(file, std::string(kHead) + yaml);
  const auto r = test::run_kvsim("plan --policy quest --context 32768 --batch 1 --format json --calibration '" + cal + "'");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out.substr(r.out.find('{')));
  for (const auto& res : j["results"])
    if (res["policy"] == "quest") return res["unmeasured_phases"];
  ADD_FAILURE() << "no quest result: " << r.out;
  return nullptr;
}
const nlohmann::json* find_named(const nlohmann::json& list, const std::string& name) {
  for (const auto& u : list)
    if (u["name"] == name) return &u;
  return nullptr;
}
}  // namespace

TEST(ValidateCli, PlanFlagsAPhaseWithAFallbackEfficiencyAsUnmeasured) {
  // GEMMs have no kernel model (their curves are measured on every library GPU): a file that gives
  // them only a constant leaves them at it, and the plan lists them.
  const auto fallback = unmeasured_of("phases:\n  gemm: {hbm: 0.5}\n", "gemm_constant.yaml");
  const nlohmann::json* u = find_named(fallback, "mlp");
  ASSERT_NE(u, nullptr) << fallback.dump();
  EXPECT_EQ((*u)["kind"], "gemm");
  EXPECT_EQ((*u)["ceiling"], "hbm");
  EXPECT_DOUBLE_EQ((*u)["constant"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ((*u)["efficiency"].get<double>(), 0.5);  // no gather runs: no run-length factor
  EXPECT_EQ((*u)["from"], "t phases.gemm.hbm");
  // Phases of other kinds with no curve are listed too, at the file's default (1.0, given by no field).
  const nlohmann::json* attn = find_named(fallback, "sparse_attention");
  ASSERT_NE(attn, nullptr) << fallback.dump();
  EXPECT_EQ((*attn)["from"], "t (unset: the roofline's 1.0)");
  // A selection's constant is not a measurement: its kernel model prices it instead (model/kernel_model.hpp).
  const auto selected = unmeasured_of("phases:\n  select: {hbm: 0.5}\n", "select_constant.yaml");
  EXPECT_EQ(find_named(selected, "topk_pages"), nullptr) << selected.dump();

  const auto curved = unmeasured_of("phases:\n  gemm: {hbm: 0.5}\ncurves:\n  - {kind: gemm, ceiling: hbm, x: bytes, "
                                    "points: [[1000, 0.3], [1.0e9, 0.6]]}\n",
                                    "gemm_curve.yaml");
  EXPECT_EQ(find_named(curved, "mlp"), nullptr) << curved.dump();
  EXPECT_NE(find_named(curved, "sparse_attention"), nullptr) << curved.dump();  // another kind: still a constant

  const auto measured = unmeasured_of("phases_measured: true\nphases:\n  gemm: {hbm: 0.5}\n", "gemm_measured.yaml");
  EXPECT_EQ(find_named(measured, "mlp"), nullptr) << measured.dump();

  const auto r = test::run_kvsim("plan --policy quest --context 32768 --batch 1 --format json --calibration roofline");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out);  // kept: a loop over a temporary's member reads freed memory
  for (const auto& res : j["results"]) EXPECT_TRUE(res["unmeasured_phases"].empty()) << res.dump();
}

TEST(ValidateCli, PlanTableAndCsvNameTheUnmeasuredPhases) {
  const std::string cal = test::write_temp("gemm_constant_t.yaml", std::string(kHead) + "phases:\n  gemm: {hbm: 0.5}\n");
  const auto t = test::run_kvsim("plan --policy quest --context 32768 --batch 1 --detail --calibration '" + cal + "'");
  ASSERT_EQ(t.exit_code, 0) << t.out;
  EXPECT_NE(t.out.find("    unmeasured (fallback efficiency, no kernel measurement):"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("mlp (gemm/hbm: constant 0.50 from t phases.gemm.hbm)"), std::string::npos) << t.out;
  // The line lists every phase the JSON lists, in the same order, the first right after the colon.
  const auto j = test::run_kvsim("plan --policy quest --context 32768 --batch 1 --format json --calibration '" + cal + "'");
  ASSERT_EQ(j.exit_code, 0) << j.out;
  const auto listed = nlohmann::json::parse(j.out)["results"][0]["unmeasured_phases"];
  ASSERT_GE(listed.size(), 2u) << j.out;
  const std::string head = "    unmeasured (fallback efficiency, no kernel measurement): ";
  const size_t at = t.out.find(head);
  ASSERT_NE(at, std::string::npos) << t.out;
  const std::string line = t.out.substr(at + head.size(), t.out.find('\n', at) - at - head.size());
  size_t from = 0;
  for (size_t i = 0; i < listed.size(); ++i) {
    const std::string name = listed[i]["name"].get<std::string>() + " (";
    const size_t where = line.find(name, from);
    ASSERT_NE(where, std::string::npos) << name << " not in: " << line;
    if (i == 0) {
      EXPECT_EQ(where, 0u) << line;
    }
    from = where + name.size();
  }
  const auto c = test::run_kvsim("plan --policy quest --context 32768 --batch 1 --format csv --calibration '" + cal + "'");
  ASSERT_EQ(c.exit_code, 0) << c.out;
  EXPECT_NE(c.out.find(",extrapolated_phases,unmeasured_phases,"), std::string::npos) << c.out;
  EXPECT_NE(c.out.find("mlp=gemm/hbm@0.5"), std::string::npos) << c.out;
}

TEST(ValidateCli, BadCalibrationFileFailsWithTheField) {
  const std::string cal = test::write_temp("bad_curve.yaml", std::string(kHead) +
                                                                 "curves:\n  - {kind: host_kernel, ceiling: dram, "
                                                                 "x: bytes, points: [[1000, 0]]}\n");
  const auto r = test::run_kvsim("plan --policy ctkvr --calibration '" + cal + "'");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("curves[0].points[0].efficiency"), std::string::npos) << r.out;
}

TEST(ValidateCli, CudaWithoutAGpuSaysSo) {
  std::string why;
  if (!cuda::devices(&why).empty()) GTEST_SKIP() << "a GPU is present; this checks the no-GPU message";
  const auto r = test::run_kvsim("validate --device cuda --quick");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("no CUDA device"), std::string::npos) << r.out;
}
