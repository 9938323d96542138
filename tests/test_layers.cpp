// The house rules: no layer includes a higher one (tools/check_layers.cmake, run by every build), and
// adding a policy is one folder plus one registry line (docs/architecture.md), shown with the test-only
// policy of tests/example_policy/ linked into a second CLI, kvsim-example-policy.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "policies/registry.hpp"
#include "test_util.hpp"

namespace kvsim::test {
namespace {

namespace fs = std::filesystem;

RunResult check_layers(const std::string& root) {
  return run_command("cmake -DROOT='" + root + "' -P '" + std::string(KVSIM_SOURCE_DIR) + "/tools/check_layers.cmake'");
}

// A scratch source tree with the given files (path -> text).
std::string tree(const std::string& name, const std::vector<std::pair<std::string, std::string>>& files) {
  const fs::path root = fs::path(::testing::TempDir()) / name;
  fs::remove_all(root);
  for (const auto& [path, text] : files) {
    fs::create_directories((root / path).parent_path());
    std::ofstream(root / path) << text;
  }
  return root.string();
}

TEST(LayerCheck, SourceTreeHasNoUpwardInclude) {
  const RunResult r = check_layers(KVSIM_SOURCE_DIR);
  EXPECT_EQ(r.exit_code, 0) << r.out;
}

TEST(LayerCheck, UpwardIncludeFailsNamingFileLineHeaderAndAllowedLayers) {
  const std::string root = tree("layers_up", {
      {"core/units.hpp", "#pragma once\n// a comment\n#include \"model/plan.hpp\"\n"},
      {"model/plan.hpp", "#pragma once\n#include \"core/units.hpp\"\n#include \"sim/step_graph.hpp\"\n"},
      {"sim/step_graph.hpp", "#pragma once\n#include <vector>\n"},
  });
  const RunResult r = check_layers(root);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.out.find("core/units.hpp:3"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"model/plan.hpp\" (layer model)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("layer core may include only: core"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1 include(s)"), std::string::npos) << r.out;  // model -> core, sim is allowed
}

TEST(LayerCheck, LibraryCodeMayNotIncludeTests) {
  const std::string root = tree("layers_tests", {
      // a test-only policy reached from the library: what the registry once did under #ifdef
      {"policies/registry.cpp", "#ifdef SOMETHING\n#include \"tests/example_policy/oracle/policy.hpp\"\n#endif\n"},
      // tests themselves include anything
      {"tests/test_x.cpp", "#include \"tests/example_policy/oracle/policy.hpp\"\n#include \"tools/kvsim/main.hpp\"\n"},
      // the Python module is its own layer: it may not include the CLI
      {"python/src/module.cpp", "#include \"serve/capacity.hpp\"\n#include \"tools/kvsim/progress.hpp\"\n"},
  });
  const RunResult r = check_layers(root);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.out.find("policies/registry.cpp:2: includes \"tests/example_policy/oracle/policy.hpp\" (layer tests)"),
            std::string::npos) << r.out;
  EXPECT_NE(r.out.find("python/src/module.cpp:2"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("tests/test_x.cpp"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("2 include(s)"), std::string::npos) << r.out;
}

TEST(LayerCheck, SiblingsAndTheReplayLayerAreSeparate) {
  const std::string root = tree("layers_side", {
      // traces and kernels are siblings: neither includes the other
      {"traces/format/trace.cpp", "#include \"kernels/reference/score.hpp\"\n"},
      // a policy may not reach up into the replay engine (replay/ is above policies/)
      {"policies/chess/selector.cpp", "#include \"traces/select/selector.hpp\"\n#include \"replay/replay.hpp\"\n"},
      // the CLI may include everything
      {"tools/kvsim/main.cpp", "#include \"sweep/spec.hpp\"\n#include \"policies/registry.hpp\"\n"},
  });
  const RunResult r = check_layers(root);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.out.find("traces/format/trace.cpp:1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("policies/chess/selector.cpp:2"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("policies/chess/selector.cpp:1"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("tools/kvsim/main.cpp"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("2 include(s)"), std::string::npos) << r.out;
}

RunResult run_example(const std::string& args) {
  return run_command(std::string("'") + KVSIM_EXAMPLE_BINARY + "' " + args);
}

TEST(AddingAPolicy, OneFolderAndOneRegistryLineShowUpInPolicyList) {
  const RunResult list = run_example("policy list");
  ASSERT_EQ(list.exit_code, 0) << list.out;
  EXPECT_NE(list.out.find("oracle"), std::string::npos) << list.out;
  EXPECT_NE(list.out.find("chess"), std::string::npos) << list.out;
  // The production CLI does not carry the test policy.
  const RunResult prod = run_kvsim("policy list");
  ASSERT_EQ(prod.exit_code, 0) << prod.out;
  EXPECT_EQ(prod.out.find("oracle"), std::string::npos) << prod.out;

  const RunResult show = run_example("policy show oracle --format json");
  ASSERT_EQ(show.exit_code, 0) << show.out;
  const auto j = nlohmann::json::parse(show.out);
  ASSERT_EQ(j["params"].size(), 1u);
  EXPECT_EQ(j["params"][0]["name"], "budget_tokens");
  EXPECT_EQ(j["params"][0]["default"], 256.0);
}

TEST(AddingAPolicy, PlansAndReplaysLikeABuiltInPolicy) {
  const RunResult plan = run_example("plan --policy oracle --set oracle.budget_tokens=512 --context 32768 --format json");
  ASSERT_EQ(plan.exit_code, 0) << plan.out;
  const auto p = nlohmann::json::parse(plan.out);
  ASSERT_EQ(p["results"].size(), 1u);
  EXPECT_EQ(p["results"][0]["policy"], "oracle");
  EXPECT_TRUE(p["results"][0]["feasible"].get<bool>());

  const std::string trace = std::string(::testing::TempDir()) + "oracle_tiny.safetensors";
  const RunResult gen = run_example("trace gen --preset tiny -o '" + trace + "'");
  ASSERT_EQ(gen.exit_code, 0) << gen.out;
  const RunResult rep = run_example("replay '" + trace + "' --policy oracle --policy streaming --budget-sweep --format json");
  ASSERT_EQ(rep.exit_code, 0) << rep.out;
  const auto r = nlohmann::json::parse(rep.out);
  int oracle_runs = 0;
  double recall_64 = -1, recall_full = -1;
  for (const auto& pol : r["policies"]) {
    if (pol["policy"] != "oracle") continue;
    ++oracle_runs;
    if (pol["label"] == "oracle@64") recall_64 = pol["quality"]["attention_recall"]["mean"].get<double>();
    recall_full = pol["quality"]["attention_recall"]["mean"].get<double>();  // the last: the whole prompt
  }
  EXPECT_GE(oracle_runs, 2) << rep.out;  // its budget axis from its registry line
  ASSERT_GE(recall_64, 0) << rep.out;
  // The exact top-k by q.k attends more attention mass as the budget grows, and nearly all of it at
  // a budget of the whole prompt (decode rows see a few generated tokens more).
  EXPECT_LT(recall_64, recall_full);
  EXPECT_GT(recall_full, 0.999);
}

TEST(AddingAPolicy, ItsOwnBudgetKnobsDriveTheTargetPlanAndCapacitySearch) {
  // oracle declares one knob in its parameter table (budget_tokens over the token grid); nothing outside
  // its folder and its registry line names it. Raising the recall floor must raise its budget.
  const std::string trace = std::string(::testing::TempDir()) + "oracle_knobs.safetensors";
  ASSERT_EQ(run_example("trace gen --preset tiny -o '" + trace + "'").exit_code, 0);
  const std::string common = "--policy oracle --trace '" + trace + "' --trace-max-steps 8";
  double budget_low = 0, budget_high = 0;
  for (const char* floor : {"0.5", "0.99"}) {
    const RunResult plan = run_example("plan --context 4096 --target-tpot 50 --min-recall " + std::string(floor) + " " +
                                       common + " --format json");
    ASSERT_EQ(plan.exit_code, 0) << plan.out;
    const auto a = nlohmann::json::parse(plan.out)["answers"];
    ASSERT_EQ(a.size(), 1u) << plan.out;
    ASSERT_TRUE(a[0]["feasible"].get<bool>()) << plan.out;
    EXPECT_GE(a[0]["quality"]["recall"].get<double>(), std::stod(floor)) << plan.out;
    EXPECT_GT(a[0]["search"]["quality_evaluations"].get<int>(), 1) << plan.out;  // the knob was walked
    const double b = a[0]["params"]["budget_tokens"].get<double>();
    // a value of the token grid: a power of two from 64, or the context
    EXPECT_TRUE(b == 4096 || (b >= 64 && std::exp2(std::round(std::log2(b))) == b)) << b;
    (std::string(floor) == "0.5" ? budget_low : budget_high) = b;
  }
  EXPECT_LT(budget_low, budget_high);

  const std::string out = std::string(::testing::TempDir()) + "oracle_capacity.json";  // stderr has progress lines
  const RunResult cap = run_example("capacity --rate 2 --slo-ttft-p99 2s --slo-tpot-p99 50ms --tp 1 --requests 200 "
                                    "--min-recall 0.99 " + common + " --format json -o '" + out + "'");
  ASSERT_EQ(cap.exit_code, 0) << cap.out;
  const auto c = nlohmann::json::parse(test::read_text(out))["policies"];
  ASSERT_EQ(c.size(), 1u) << cap.out;
  EXPECT_EQ(c[0]["policy"], "oracle");
  EXPECT_NE(c[0]["budget"].get<std::string>().find("budget_tokens="), std::string::npos) << cap.out;
  EXPECT_GE(c[0]["quality"]["recall"].get<double>(), 0.99) << cap.out;
}

TEST(AddingAPolicy, EveryPolicyWithABudgetAxisDeclaresBudgetKnobs) {
  // A policy's knobs come from its own table; a policy the replay can put on a budget axis but the
  // target search could not walk would silently plan at its scenario budget.
  for (const PolicyEntry& e : policy_registry()) {
    const Policy& p = e.cost_model();
    if (e.set_budget == nullptr) {
      EXPECT_TRUE(p.budget_knobs().empty()) << p.name();
      continue;
    }
    EXPECT_FALSE(p.budget_knobs().empty()) << p.name();
    for (const BudgetKnob& k : p.budget_knobs()) {
      ASSERT_GE(k.param, 0) << p.name();
      ASSERT_LT(size_t(k.param), p.params().size()) << p.name();
      const std::vector<double> g = k.grid.at(131072);
      EXPECT_TRUE(std::is_sorted(g.begin(), g.end())) << p.name();
    }
  }
}

}  // namespace
}  // namespace kvsim::test
