// Where a quality floor's numbers come from (sweep/quality_source.hpp, issue 30 item 3): a trace file,
// a fitted synthetic config, or a hand-set preset generated at the workload's length; the target plan
// and capacity reports name which.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "core/error.hpp"
#include "core/units.hpp"
#include "sweep/quality_source.hpp"
#include "test_util.hpp"
#include "traces/synthetic/synthetic.hpp"

namespace kvsim {
namespace {

namespace fs = std::filesystem;

fs::path scratch_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("kvsim_quality_source_" + name);
  fs::create_directories(d);
  return d;
}

TEST(QualitySource, APresetIsGeneratedAtTheWorkloadLengthAndFlaggedUncalibrated) {
  const sweep::QualitySource q = sweep::resolve_quality_source("tiny", 6000, 8 * kGiB);
  EXPECT_EQ(q.kind, sweep::QualitySource::Kind::preset);
  ASSERT_TRUE(q.synthetic);
  EXPECT_EQ(q.synthetic->prompt_tokens, 6000);
  EXPECT_NE(q.description.find("uncalibrated"), std::string::npos) << q.description;
  EXPECT_NE(q.description.find("6000 prompt"), std::string::npos) << q.description;
}

TEST(QualitySource, ATraceFileIsReal) {
  const fs::path d = scratch_dir("real");
  const fs::path f = d / "t.safetensors";
  ASSERT_EQ(test::run_kvsim("trace gen --preset tiny -o '" + f.string() + "'").exit_code, 0);
  const sweep::QualitySource q = sweep::resolve_quality_source(f.string(), 6000, 8 * kGiB);
  EXPECT_EQ(q.kind, sweep::QualitySource::Kind::real);
  EXPECT_FALSE(q.synthetic);
  EXPECT_EQ(q.description, "real trace " + f.string());
}

TEST(QualitySource, AConfigWithAFitBlockIsFittedAndQuotesItsProvenance) {
  const fs::path d = scratch_dir("fitted");
  // A hand-written config first: synthetic, but nothing fitted it.
  const fs::path plain = d / "plain.yaml";
  std::ofstream(plain) << "layers: 2\nheads: 4\nkv_heads: 2\nhead_dim: 64\ngenerated_tokens: 32\n";
  const sweep::QualitySource p = sweep::resolve_quality_source(plain.string(), 3000, 8 * kGiB);
  EXPECT_EQ(p.kind, sweep::QualitySource::Kind::preset);
  EXPECT_NE(p.description.find("uncalibrated"), std::string::npos);
  // With a fit block: fitted, naming what it was fitted on.
  const fs::path fitted = d / "fitted.yaml";
  std::ofstream(fitted) << "layers: 2\nheads: 4\nkv_heads: 2\nhead_dim: 64\ngenerated_tokens: 32\n"
                           "fit:\n  sources:\n    - {file: smol-gpl-2k.safetensors, tokens: 2112, residuals: "
                           "[{statistic: cos1, real: 0.83, fitted: 0.8, relative_error: -0.036}, "
                           "{statistic: m90, real: 0.06, fitted: 0.07, relative_error: 0.12}]}\n";
  const sweep::QualitySource f = sweep::resolve_quality_source(fitted.string(), 3000, 8 * kGiB);
  EXPECT_EQ(f.kind, sweep::QualitySource::Kind::fitted);
  EXPECT_NE(f.description.find("fit on smol-gpl-2k.safetensors (2112 tokens); largest fit residual 12% (m90)"),
            std::string::npos)
      << f.description;
  EXPECT_EQ(f.description.find("uncalibrated"), std::string::npos);
}

TEST(QualitySource, AModelTooBigForTheMemoryLimitKeepsEvenlySpacedLayers) {
  const fs::path d = scratch_dir("memory");
  const fs::path cfg = d / "big.yaml";
  std::ofstream(cfg) << "layers: 16\nheads: 8\nkv_heads: 2\nhead_dim: 64\ngenerated_tokens: 16\n";
  const sweep::QualitySource all = sweep::resolve_quality_source(cfg.string(), 4096, 8 * kGiB);
  EXPECT_TRUE(all.synthetic->store_layers.empty() || all.synthetic->store_layers.size() == 16u);
  // Each layer of this config takes ~4.3 MB in float32 (keys and values of 2 KV heads, 8 query rows per
  // decode step): a 20 MB limit holds a few of them, spread over the model.
  const sweep::QualitySource few = sweep::resolve_quality_source(cfg.string(), 4096, 20e6);
  ASSERT_FALSE(few.synthetic->store_layers.empty());
  EXPECT_LT(few.synthetic->store_layers.size(), 16u);
  EXPECT_EQ(few.synthetic->store_layers.front(), 0);
  EXPECT_EQ(few.synthetic->store_layers.back(), 15);
  EXPECT_NE(few.description.find("(memory limit)"), std::string::npos) << few.description;
}

TEST(QualitySource, AMissingFileOrUnknownPresetIsAnErrorNamingTheOption) {
  try {
    sweep::resolve_quality_source("/nonexistent/dir/t.safetensors", 4096, 8 * kGiB);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("--trace"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("allowed"), std::string::npos) << e.what();
  }
  EXPECT_THROW(sweep::resolve_quality_source("neddle", 4096, 8 * kGiB), InputError);
  try {
    sweep::resolve_quality_source("/nonexistent/fitted.yaml", 4096, 8 * kGiB);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("--trace"), std::string::npos) << e.what();
  }
}

TEST(QualitySource, TheTargetPlanAndCapacityNameTheSource) {
  const auto plan = test::run_kvsim(
      "plan --context 4096 --policy quest --target-tpot 30 --min-recall 0.9 --trace tiny --trace-max-steps 8 --format json");
  ASSERT_EQ(plan.exit_code, 0) << plan.out;
  const auto j = nlohmann::json::parse(plan.out.substr(plan.out.find('{')));
  EXPECT_EQ(j["target"]["quality_source"]["kind"], "preset");
  EXPECT_NE(j["target"]["quality_source"]["description"].get<std::string>().find("4096 prompt"), std::string::npos);
  const auto cap = test::run_kvsim(
      "capacity --rate 1 --requests 20 --policy quest --slo-tpot-p99 50ms --min-recall 0.9 --trace tiny "
      "--trace-max-steps 8");
  ASSERT_EQ(cap.exit_code, 0) << cap.out;
  EXPECT_NE(cap.out.find("quality from synthetic tiny generated at"), std::string::npos) << cap.out;
}

}  // namespace
}  // namespace kvsim
