// Calibrated by default (issue 18): a scenario that names no calibration gets the GPU's curves from
// published kernel measurements and the host's measured curves (never 1.0 for host phases); the plan
// names the calibration and carries the estimate with the roofline bound beside it; a GPU without
// measurements of its own borrows from its architecture and says so.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "validate/published.hpp"
#include "model/library.hpp"
#include "test_util.hpp"

namespace kvsim {
namespace {

Phase host_phase(PhaseKind kind, const char* name, double dram_bytes) {
  Phase p;
  p.name = name;
  p.kind = kind;
  p.device = Device::cpu;
  p.unit = ComputeUnit::host;
  p.work.dram_bytes = dram_bytes;
  p.work.flops = dram_bytes / 4;
  return p;
}

TEST(DefaultCalibration, HostPhasesAreNeverAtTheRooflineForAnyLibraryHost) {
  const GpuSpec gpu = test::gpu("h100-sxm");
  for (const std::string& hn : library_names(LibraryKind::host)) {
    const HostSpec host = test::host(hn);
    const Calibration c = default_calibration(gpu, host);
    EXPECT_TRUE(c.calibrated) << hn;
    EXPECT_NE(c.description.find(hn), std::string::npos) << c.description;
    for (const char* name : {"cpu_rerank", "cpu_attention", "some_other_host_routine"})
      for (double bytes : {1e5, 1e7, 1e9}) {
        const Phase p = host_phase(PhaseKind::host_kernel, name, bytes);
        EXPECT_LT(c.efficiency(p, Ceiling::dram, bytes), 1.0) << hn << " " << name << " " << bytes;
      }
  }
}

TEST(DefaultCalibration, AHostWithoutItsOwnMeasurementSaysWhichHostItBorrows) {
  const Calibration c = default_calibration(test::gpu("h100-sxm"), test::host("sapphire-rapids-2s"));
  EXPECT_NE(c.name.find(kDefaultHostCalibration), std::string::npos) << c.name;
  EXPECT_NE(c.description.find("no measurement of its own"), std::string::npos) << c.description;
}

TEST(DefaultCalibration, PlanNamesItAndCarriesEstimateAndBound) {
  const auto r = test::run_kvsim("plan --policy ctkvr --policy full --context 32768 --batch 4 --format json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out.substr(r.out.find('{')));
  EXPECT_TRUE(j["calibration"]["calibrated"].get<bool>());
  EXPECT_NE(j["calibration"]["name"].get<std::string>(), "roofline");
  for (const auto& res : j["results"]) {
    ASSERT_TRUE(res["feasible"].get<bool>()) << res.dump();
    ASSERT_FALSE(res["bound"].is_null()) << res.dump();
    // The roofline is a bound: no calibrated estimate is faster.
    EXPECT_LE(res["bound"]["tpot_ms"].get<double>(), res["tpot_ms"].get<double>() * (1 + 1e-12));
    EXPECT_LE(res["bound"]["ttft_ms"].get<double>(), res["ttft_ms"].get<double>() * (1 + 1e-12));
    EXPECT_GE(res["bound"]["throughput_tok_s"].get<double>(), res["throughput_tok_s"].get<double>() * (1 - 1e-12));
  }
  // CTKVR's CPU rerank runs at the measured host efficiency, so its estimate is strictly above the bound.
  EXPECT_GT(j["results"][0]["tpot_ms"].get<double>(), j["results"][0]["bound"]["tpot_ms"].get<double>());

  const auto table = test::run_kvsim("plan --policy ctkvr --context 32768 --batch 4");
  ASSERT_EQ(table.exit_code, 0) << table.out;
  EXPECT_NE(table.out.find("calibration: " + j["calibration"]["name"].get<std::string>()), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("roofline bound: TPOT"), std::string::npos) << table.out;
}

TEST(DefaultCalibration, RooflineKeepsTheUncalibratedAnswer) {
  const auto r = test::run_kvsim("plan --policy ctkvr --context 32768 --batch 4 --format json --calibration roofline");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["calibration"]["name"], "roofline");
  EXPECT_FALSE(j["calibration"]["calibrated"].get<bool>());
  EXPECT_TRUE(j["results"][0]["bound"].is_null());
  const auto table = test::run_kvsim("plan --policy ctkvr --context 32768 --batch 4 --calibration roofline");
  EXPECT_NE(table.out.find("uncalibrated: efficiencies 1.0, times are lower bounds"), std::string::npos) << table.out;
}

validate::PublishedPoint attention_point(const std::string& id, const std::string& gpu, double ctx, double frac) {
  validate::PublishedPoint p;
  p.id = id;
  p.gpu = gpu;
  p.family = "decode_attention";
  p.context_tokens = ctx;
  p.q_heads = p.kv_heads = 32;
  p.head_dim = 128;
  p.dtype = "fp16";
  p.fraction_of_peak = frac;
  p.source = "test";
  return p;
}

TEST(PublishedFit, SaturatingCurveThroughExactPointsAndHeldOutError) {
  // Points on e = 0.9 x / (x + 1e8) exactly: the fit recovers it, fit and held-out errors are ~0.
  std::vector<validate::PublishedPoint> pts;
  for (double ctx : {1024.0, 4096.0, 8192.0, 16384.0, 65536.0, 262144.0}) {
    const double bytes = ctx * 2 * 32 * 128 * 2 + 2 * 32 * 128 * 2;
    pts.push_back(attention_point("p" + std::to_string(int(ctx)), "h100-sxm", ctx, 0.9 * bytes / (bytes + 1e8)));
  }
  const auto fit = validate::fit_published(pts, {test::gpu("h100-sxm")});
  ASSERT_EQ(fit.fits.size(), 1u);
  const auto& f = fit.fits[0];
  EXPECT_EQ(f.kind, PhaseKind::attention);
  EXPECT_EQ(f.ceiling, Ceiling::hbm);
  EXPECT_NEAR(f.e_max, 0.9, 0.01);
  EXPECT_NEAR(f.x_half / 1e8, 1.0, 0.05);
  EXPECT_LT(f.fit_error, 0.01);
  EXPECT_EQ(f.heldout_points, 2);
  EXPECT_LT(f.heldout_error, 0.02);
}

TEST(PublishedFit, AGpuWithoutItsOwnPointsBorrowsFromItsArchitectureAndSaysSo) {
  std::vector<validate::PublishedPoint> pts = {
      attention_point("a", "h100-sxm", 8192, 0.6),  attention_point("b", "h100-sxm", 32768, 0.82),
      attention_point("c", "h100-sxm", 65536, 0.9), attention_point("d", "a100-80g", 8192, 0.67),
      attention_point("e", "a100-80g", 32768, 0.84), attention_point("f", "a100-80g", 65536, 0.87),
      // one point is too few for a curve: h200 must not take it as its own
      attention_point("g", "h200", 65536, 0.95)};
  const auto fit = validate::fit_published(pts, {test::gpu("h100-sxm"), test::gpu("h200"), test::gpu("a100-80g"),
                                                 test::gpu("v100-32g")});
  ASSERT_EQ(fit.gpus.size(), 4u);
  for (const auto& f : fit.fits) EXPECT_EQ(f.usable, f.gpu != "h200") << f.gpu << ": " << f.why_unused;
  for (const auto& g : fit.gpus) {
    const std::string yaml = validate::published_calibration_yaml(g, "m.yaml", "kvsim calibrate published");
    if (g.gpu == "h200") {
      ASSERT_EQ(g.curves.size(), 1u);
      EXPECT_EQ(g.curves[0].gpu, "h100-sxm");
      EXPECT_NE(yaml.find("borrowed: h100-sxm (same architecture, hopper)"), std::string::npos) << yaml;
    } else if (g.gpu == "v100-32g") {
      EXPECT_TRUE(g.curves.empty());  // no Volta points: the roofline, not another architecture's curve
      EXPECT_NE(yaml.find("curves: []"), std::string::npos) << yaml;
    } else {
      ASSERT_EQ(g.curves.size(), 1u) << g.gpu;
      EXPECT_EQ(g.curves[0].gpu, g.gpu);
      EXPECT_EQ(yaml.find("borrowed"), std::string::npos) << yaml;
    }
    // Every file loads as a calibration.
    const std::string path = test::write_temp(g.gpu + "-published.yaml", yaml);
    EXPECT_NO_THROW(load_calibration_file(path)) << yaml;
  }
}

validate::PublishedPoint gemm_point(const std::string& id, const std::string& gpu, double m, double nk, double time_s) {
  validate::PublishedPoint p;
  p.id = id;
  p.gpu = gpu;
  p.family = "gemm";
  p.m = m;
  p.n = p.k = nk;
  p.dtype = "fp16";
  p.time_s = time_s;
  p.source = "test";
  return p;
}

TEST(PublishedFit, AGemmBelowTheRidgeIsBandwidthBoundAndAboveItComputeBound) {
  // h100-sxm: 989.4 TFLOP/s fp16 over 3.35 TB/s, a ridge near 295 FLOP/B. m = 16 tokens on a square
  // weight is ~16 FLOP/B (the HBM ceiling); a 4096-cube is ~1365 FLOP/B (the tensor ceiling).
  const GpuSpec g = test::gpu("h100-sxm");
  std::vector<validate::PublishedPoint> pts;
  for (double nk : {4096.0, 8192.0, 16384.0}) {
    const double bytes = (nk * nk + 16 * 2 * nk) * 2;
    pts.push_back(gemm_point("skinny" + std::to_string(int(nk)), "h100-sxm", 16, nk, bytes / (0.8 * g.hbm_bandwidth)));
    pts.push_back(gemm_point("cube" + std::to_string(int(nk)), "h100-sxm", nk, nk,
                             2 * nk * nk * nk / (0.7 * g.tensor_fp16)));
  }
  const auto fit = validate::fit_published(pts, {g});
  ASSERT_EQ(fit.fits.size(), 2u);
  for (const auto& f : fit.fits) {
    EXPECT_EQ(f.kind, PhaseKind::gemm);
    EXPECT_TRUE(f.usable) << f.why_unused;
    ASSERT_EQ(f.points.size(), 3u);
    const double e = f.ceiling == Ceiling::hbm ? 0.8 : 0.7;
    EXPECT_TRUE(f.ceiling == Ceiling::hbm || f.ceiling == Ceiling::tensor);
    for (const auto& p : f.points) {
      EXPECT_EQ(p.id.rfind(f.ceiling == Ceiling::hbm ? "skinny" : "cube", 0), 0u) << p.id;
      EXPECT_NEAR(p.efficiency, e, 1e-9) << p.id;
    }
  }
}

TEST(PublishedFit, AGpuOutsideTheLibraryLendsOnlyWhenItsPointsNameTheArchitecture) {
  auto points = [](const std::string& arch) {
    std::vector<validate::PublishedPoint> pts;
    for (double ctx : {8192.0, 32768.0, 65536.0}) {
      pts.push_back(attention_point("x" + std::to_string(int(ctx)), "a100-pcie-80g", ctx, 0.8));
      pts.back().architecture = arch;
    }
    return pts;
  };
  const auto lent = validate::fit_published(points("ampere"), {test::gpu("a40"), test::gpu("h100-sxm")});
  const auto kept = validate::fit_published(points(""), {test::gpu("a40"), test::gpu("h100-sxm")});
  ASSERT_EQ(lent.gpus.size(), 2u);
  for (const auto& g : lent.gpus) {
    if (g.gpu == "a40") {
      ASSERT_EQ(g.curves.size(), 1u);
      EXPECT_EQ(g.curves[0].gpu, "a100-pcie-80g");
      EXPECT_EQ(g.borrowed.count("attention/hbm"), 1u);
    } else {
      EXPECT_TRUE(g.curves.empty()) << g.gpu;  // another architecture
    }
  }
  for (const auto& g : kept.gpus) EXPECT_TRUE(g.curves.empty()) << g.gpu;
}

TEST(PublishedFit, TheLibraryFilesAreWhatTheMeasurementsGive) {
  const std::string data = std::string(KVSIM_SOURCE_DIR) + "/scenarios/measurements/gpu-published.yaml";
  if (!std::filesystem::exists(data)) GTEST_SKIP() << "no published measurements";
  const std::string out = std::string(::testing::TempDir()) + "published_cal";
  std::filesystem::remove_all(out);
  const auto r = test::run_kvsim("calibrate published --out-dir '" + out + "'");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  for (const auto& e : std::filesystem::directory_iterator(out)) {
    const std::string lib = std::string(KVSIM_SOURCE_DIR) + "/scenarios/calibration/" + e.path().filename().string();
    EXPECT_EQ(test::read_text(e.path().string()), test::read_text(lib))
        << lib << " is stale: re-run `kvsim calibrate published --report docs/validation/gpu-published.md`";
  }
}

TEST(PublishedFit, BadMeasurementFileNamesFileLineAndField) {
  const std::string path = test::write_temp("bad_measurements.yaml",
                                            "schema: kvsim.measurements/1\nmeasurements:\n"
                                            "  - id: x\n    gpu: h100-sxm\n    family: decode_attention\n"
                                            "    config: {context_tokens: 1024, kv_heads: 8, head_dim: 128}\n"
                                            "    measured: {time_s: 1e-5, fraction_of_peak_bandwidth: 0.5}\n"
                                            "    source: s\n    verified: v\n");
  const auto r = test::run_kvsim("calibrate published --measurements '" + path + "' --out-dir '" +
                                 std::string(::testing::TempDir()) + "bad_cal'");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("bad_measurements.yaml"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("measurements[0].measured"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("exactly one of"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace kvsim
