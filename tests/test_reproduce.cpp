// Reproducing the seed papers (scenarios/papers/): every paper scenario runs, the memory figures the
// configuration determines match the published digits, bad `reproduce:` blocks are rejected with the
// field named, and the implementation profile changes what it should and nothing else.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "model/plan.hpp"
#include "model/reproduction.hpp"
#include "test_util.hpp"
#include "policies/registry.hpp"

using namespace kvsim;

namespace {

Reproduction from_text(const std::string& yaml) {
  return load_reproduction(load_yaml_string(yaml, "bad.yaml"), "bad.yaml", policy_catalog());
}

// A minimal valid paper scenario; `series` is spliced into the reproduce block.
std::string scenario_with(const std::string& series) {
  return "hardware: a40\nmodel: llama-3-8b\nworkload:\n  context_tokens: 4096\n  batch: 1\npolicies: [full]\n"
         "reproduce:\n  paper: test\n  title: t\n  series:\n" + series;
}

std::string error_of(const std::string& yaml) {
  try {
    from_text(yaml);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(Reproduce, EveryPaperScenarioRunsAndHasFigures) {
  const auto files = paper_scenarios("");
  ASSERT_GE(files.size(), 3u);
  for (const char* paper : {"sentencekv", "chunkkv", "sekv"}) EXPECT_FALSE(paper_scenarios(paper).empty()) << paper;
  for (const std::string& f : files) {
    const Reproduction r = load_reproduction_file(f, policy_catalog());
    ASSERT_FALSE(r.figures.empty()) << f;
    const auto rows = reproduce(r);
    ASSERT_EQ(rows.size(), r.figures.size()) << f;
    for (const ReproRow& row : rows) {
      if (row.figure->oom || row.predicted_oom) continue;
      EXPECT_GT(row.predicted, 0) << f << " line " << row.figure->line;
      EXPECT_TRUE(std::isfinite(row.relative_error)) << f << " line " << row.figure->line;
    }
  }
}

TEST(Reproduce, MemoryFiguresGivenWithTheirConfigurationMatchExactly) {
  int exact = 0;
  for (const std::string& f : paper_scenarios("")) {
    const Reproduction r = load_reproduction_file(f, policy_catalog());
    for (const ReproRow& row : reproduce(r)) {
      if (!row.figure->exact) continue;
      ++exact;
      EXPECT_TRUE(row.matches_exactly) << f << " line " << row.figure->line << ": published " << row.figure->value
                                       << " " << row.figure->unit << ", predicted " << row.predicted;
    }
  }
  EXPECT_GE(exact, 7);  // SentenceKV §A.6, ChunkKV §3.1 (2) and KIVI table (2), SEKV App. D (2)
}

TEST(Reproduce, OomRowsAreCompared) {
  // LongChat-7B full KV on a 94 GB H100 NVL: the paper runs out of memory at 128K and 256K. At 256K the
  // KV alone (128 GiB) exceeds HBM and the model agrees; at 128K the model's prefill workspace is
  // smaller than Hugging Face's, so it fits (docs/reproductions.md) and the row is a mismatch.
  const Reproduction r =
      load_reproduction_file(std::string(KVSIM_SOURCE_DIR) + "/scenarios/papers/sentencekv/table5-longchat-7b.yaml", policy_catalog());
  int oom = 0;
  for (const ReproRow& row : reproduce(r)) {
    if (!row.figure->oom) continue;
    ++oom;
    EXPECT_EQ(row.matches_exactly, row.predicted_oom) << "line " << row.figure->line;
    if (row.figure->context == 262144) {
      EXPECT_TRUE(row.predicted_oom);
      EXPECT_NE(row.oom_reason.find("HBM"), std::string::npos) << row.oom_reason;
    }
  }
  EXPECT_EQ(oom, 4);
}

TEST(Reproduce, ExactMeansWithinTheLastPrintedDigit) {
  // 8192 tokens of LLaMA-3-8B's GQA cache are 2^30 B: "1.0000" matches, "1.0002" does not.
  auto rows_for = [](const std::string& value) {
    const Reproduction r = from_text(scenario_with(
        "    - {source: T, policy: full, metric: kv_prompt, unit: GiB, exact: true, contexts: [8192], values: [" + value + "]}\n"));
    return reproduce(r);
  };
  EXPECT_TRUE(rows_for("1.0000")[0].matches_exactly);
  EXPECT_FALSE(rows_for("1.0002")[0].matches_exactly);
  EXPECT_NEAR(rows_for("1.0002")[0].predicted, 1.0, 1e-12);
}

// A throughput figure is the plan's decode tokens per second per GPU at the figure's batch (CTKVR's
// Tables 14 and 15 are tokens/s), and only a rate unit is accepted for it.
TEST(Reproduce, ThroughputIsThePlansTokensPerSecondAtTheBatch) {
  const Reproduction r = from_text(scenario_with(
      "    - {source: T, policy: full, metric: throughput, unit: tok/s, batch: 2, contexts: [4096], values: [100]}\n"
      "    - {source: T, policy: full, metric: tpot, unit: s, batch: 2, contexts: [4096], values: [0.05]}\n"));
  const std::vector<ReproRow> rows = reproduce(r);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_GT(rows[0].predicted, 0);
  EXPECT_NEAR(rows[0].predicted, 2.0 / rows[1].predicted, 1e-9 * rows[0].predicted);  // batch / TPOT
  EXPECT_NEAR(rows[0].relative_error, rows[0].predicted / 100 - 1, 1e-12);
  const std::string e = error_of(scenario_with(
      "    - {source: T, policy: full, metric: throughput, unit: ms, contexts: [4096], values: [1]}\n"));
  EXPECT_NE(e.find("reproduce.series[0].unit"), std::string::npos) << e;
  EXPECT_NE(e.find("tok/s"), std::string::npos) << e;
}

TEST(Reproduce, BadBlocksNameTheField) {
  struct Case {
    const char* series;  // one series entry, flow style
    const char* field;   // the field the error must name
  };
  const Case cases[] = {
      {"{source: T, policy: full, metric: tpot, unit: hours, contexts: [1], values: [1]}", "reproduce.series[0].unit"},
      {"{source: T, policy: full, metric: tpot, unit: GiB, contexts: [1], values: [1]}", "reproduce.series[0].unit"},
      {"{source: T, policy: full, metric: tpot, unit: ms, contexts: [1, 2], values: [1]}", "reproduce.series[0].values"},
      {"{source: T, policy: full, metric: tpot, unit: ms, contexts: [1], values: [fast]}", "reproduce.series[0].values"},
      {"{source: T, policy: chess, metric: tpot, unit: ms, contexts: [1], values: [1]}", "reproduce.series[0].policy"},
      {"{source: T, policy: full, metric: tpot, unit: ms, exact: true, contexts: [1], values: [1]}", "reproduce.series[0].exact"},
      {"{source: T, policy: full, metric: tpot, unit: ms, contexts: [1], values: [1], colour: red}", "reproduce.series[0].colour"},
      {"{source: T, policy: full, metrc: tpot, unit: ms, contexts: [1], values: [1]}", "reproduce.series[0].metric"},
      // a figure left out of the comparable median must say why
      {"{source: T, policy: full, metric: tpot, unit: ms, comparable: false, contexts: [1], values: [1]}",
       "reproduce.series[0].comparable"},
  };
  for (const Case& c : cases) {
    const std::string e = error_of(scenario_with(std::string("    - ") + c.series + "\n"));
    EXPECT_NE(e.find(c.field), std::string::npos) << c.series << " -> " << e;
    EXPECT_EQ(e.rfind("bad.yaml:", 0), 0u) << e;
  }
}

TEST(Reproduce, PlanAcceptsAndIgnoresTheReproduceBlock) {
  const Scenario s = load_scenario(load_yaml_string(scenario_with(
                                       "    - {source: T, policy: full, metric: tpot, unit: ms, contexts: [1], values: [1]}\n"),
                                                   "ok.yaml"),
                                   "ok.yaml", policy_catalog());
  EXPECT_TRUE(s.reproduce.IsMap());
  EXPECT_EQ(s.policies.size(), 1u);
}

TEST(Implementation, ExpandedGqaCachesEveryQueryHeadButKeepsTheProjections) {
  const char* base = "hardware: a40\nmodel: llama-3-8b\nworkload: {context_tokens: 2048, batch: 1}\npolicies: [full]\n";
  const Scenario plain = load_scenario(load_yaml_string(base, "a.yaml"), "a.yaml", policy_catalog());
  const Scenario expanded =
      load_scenario(load_yaml_string(std::string(base) + "implementation: {kv_expand_gqa: true}\n", "b.yaml"), "b.yaml", policy_catalog());
  const Deployment a = make_deployment(plain), b = make_deployment(expanded);
  EXPECT_DOUBLE_EQ(a.kv_bytes_per_token(), 131072);      // 2 x 32 layers x 8 KV heads x 128 x 2 B
  EXPECT_DOUBLE_EQ(b.kv_bytes_per_token(), 4 * 131072);  // 32 query heads
  EXPECT_DOUBLE_EQ(a.weight_bytes(), b.weight_bytes());
  // Dense attention reads four times the KV.
  const ParamValues none;
  const double ta = decode_step_seconds(a, *find_policy("full"), none, 1, 65536);
  const double tb = decode_step_seconds(b, *find_policy("full"), none, 1, 65536);
  EXPECT_GT(tb, ta);
}

TEST(Implementation, WholePromptPrefillSizesTheWorkspaceByThePrompt) {
  const char* base = "hardware: h100-nvl\nmodel: llama-3.1-8b\nworkload: {context_tokens: [16384, 65536], batch: 1}\npolicies: [snapkv]\n";
  auto peak_growth = [](const Scenario& s) {
    const Deployment d = make_deployment(s);
    auto peak = [&](int64_t n) {
      return evaluate(DesignPoint{&d, s.policies[0].policy, &s.policies[0].params, n, 1, 1}).memory.hbm_bytes;
    };
    return peak(65536) - peak(16384);
  };
  const Scenario chunked = load_scenario(load_yaml_string(base, "a.yaml"), "a.yaml", policy_catalog());
  const Scenario whole =
      load_scenario(load_yaml_string(std::string(base) + "implementation: {prefill: whole}\n", "b.yaml"), "b.yaml", policy_catalog());
  // SnapKV keeps 1024 tokens: with an 8K-token chunk the peak grows only by one prompt layer's KV
  // (4 KiB per token); prefilling the whole prompt adds the activations of 48K more tokens.
  EXPECT_NEAR(peak_growth(chunked), 49152.0 * 4096, 1.0);
  EXPECT_GT(peak_growth(whole), 49152.0 * 4096 * 10);
  EXPECT_NE(error_of("hardware: a40\nmodel: llama-3-8b\nworkload: {context_tokens: 1}\nimplementation: {prefill: lazy}\n"
                     "reproduce: {paper: p, title: t, series: []}\n")
                .find("implementation.prefill"),
            std::string::npos);
}

TEST(ReproduceCli, RunsEveryPaperAndRejectsAnUnknownOne) {
  const auto all = test::run_kvsim("reproduce");
  EXPECT_EQ(all.exit_code, 0) << all.out;
  EXPECT_NE(all.out.find("summary:"), std::string::npos);
  const auto j = test::run_kvsim("reproduce chunkkv --format json");
  ASSERT_EQ(j.exit_code, 0) << j.out;
  const auto rows = nlohmann::json::parse(j.out);
  ASSERT_FALSE(rows.empty());
  for (const auto& row : rows) EXPECT_EQ(row["paper"], "chunkkv");
  const auto csv = test::run_kvsim("reproduce sekv --format csv");
  EXPECT_EQ(csv.exit_code, 0);
  EXPECT_EQ(csv.out.rfind("paper,file,source,row,", 0), 0u) << csv.out;
  const auto bad = test::run_kvsim("reproduce sentencekb");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.out.find("did you mean 'sentencekv'"), std::string::npos) << bad.out;
}

TEST(ReproduceCli, FiguresMarkedNotComparableAreShownButLeftOutOfTheComparableMedian) {
  // Two figures of one step: the first comparable, the second (ten times off) not. The summary's
  // comparable median is the first's error alone; the overall median is the mean of the two.
  const std::string path = test::write_temp(
      "notcomparable.yaml",
      scenario_with("    - {source: T, label: kept, policy: full, metric: tpot, unit: ms, contexts: [4096], values: [30]}\n"
                    "    - {source: T, label: left, policy: full, metric: tpot, unit: ms, contexts: [4096], values: [3],\n"
                    "       comparable: false, note: another setup's number}\n"));
  const auto j = test::run_kvsim("reproduce --file '" + path + "' --format json");
  ASSERT_EQ(j.exit_code, 0) << j.out;
  const auto rows = nlohmann::json::parse(j.out);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_TRUE(rows[0]["comparable"].get<bool>());
  EXPECT_FALSE(rows[1]["comparable"].get<bool>());
  const double kept = std::fabs(rows[0]["relative_error"].get<double>());
  const double left = std::fabs(rows[1]["relative_error"].get<double>());
  ASSERT_GT(std::fabs(kept - left), 0.01);
  const auto t = test::run_kvsim("reproduce --file '" + path + "'");
  ASSERT_EQ(t.exit_code, 0) << t.out;
  EXPECT_NE(t.out.find("(not comparable"), std::string::npos) << t.out;
  char want[160];
  std::snprintf(want, sizeof want, "2 other figures, median |error| %.1f%%; 1 of them comparable, median |error| %.1f%%",
                100 * (kept + left) / 2, 100 * kept);
  EXPECT_NE(t.out.find(want), std::string::npos) << want << "\n" << t.out;
}

TEST(Implementation, ConcatAppendAndRepeatKvMultiplyTheCacheTraffic) {
  const char* base = "hardware: a40\nmodel: llama-3-8b\nworkload: {context_tokens: 4096, batch: 1}\npolicies: [full]\n";
  auto deployment_with = [&](const std::string& impl) {
    static Scenario s;  // make_deployment points into it; one at a time
    s = load_scenario(load_yaml_string(std::string(base) + impl, "i.yaml"), "i.yaml", policy_catalog());
    return make_deployment(s);
  };
  const double row = 131072.0 / 32;  // one token's K and V in one layer of LLaMA-3-8B, bf16
  EXPECT_DOUBLE_EQ(deployment_with("").decode_cache_bytes(1000, true), 1000 * row);
  EXPECT_DOUBLE_EQ(deployment_with("implementation: {kv_append: concat}\n").decode_cache_bytes(1000, true), 3000 * row);
  EXPECT_DOUBLE_EQ(deployment_with("implementation: {kv_append: concat}\n").decode_cache_bytes(1000, false), 1000 * row);
  // 32 query heads over 8 KV heads: read, write four copies, read four copies.
  EXPECT_DOUBLE_EQ(deployment_with("implementation: {attention: repeat_kv}\n").decode_cache_bytes(1000, false), 9000 * row);
  // Full KV's decode step grows with the extra traffic; the weights' share does not change.
  const Deployment plain = deployment_with("");
  const double t_plain = decode_step_seconds(plain, *find_policy("full"), {}, 1, 65536);
  const Deployment concat = deployment_with("implementation: {kv_append: concat}\n");
  EXPECT_GT(decode_step_seconds(concat, *find_policy("full"), {}, 1, 65536), t_plain);
}
