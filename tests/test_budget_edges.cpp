// Budgets at the edges (issue 10, numerical hygiene): the smallest budget a policy accepts still
// attends something (the policy's floor: one Quest page, SnapKV's observation window), and a budget at
// or above the context attends every token and reproduces full attention up to float rounding. Both
// behaviours are documented in docs/robustness.md; a budget of 0 is refused by the parameter range.
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/test_util.hpp"

namespace kvsim {
namespace {

const std::string& edge_trace() {
  static const std::string path = [] {
    const std::string p = std::string(::testing::TempDir()) + "kvsim_budget_edges.safetensors";
    const auto r = test::run_kvsim("trace gen --preset tiny --set prompt_tokens=448 --set generated_tokens=64 -o '" + p + "'");
    EXPECT_EQ(r.exit_code, 0) << r.out;
    return p;
  }();
  return path;
}

nlohmann::json quality(const std::string& policy, const std::string& set) {
  const auto r = test::run_kvsim("replay '" + edge_trace() + "' --policy " + policy + " --set " + set + " --format json");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  return nlohmann::json::parse(r.out)["policies"][0]["quality"];
}

TEST(BudgetEdges, SmallestBudgetKeepsThePolicyFloor) {
  const auto quest = quality("quest", "quest.budget_tokens=1");
  EXPECT_GE(quest["tokens_attended"]["min"].get<double>(), 1);
  EXPECT_LE(quest["tokens_attended"]["max"].get<double>(), 16);  // one page of the default page_size
  const auto snap = quality("snapkv", "snapkv.budget_tokens=1");
  EXPECT_GE(snap["tokens_attended"]["min"].get<double>(), 32);  // the observation window of the tiny preset
  for (const auto& q : {quest, snap}) EXPECT_LT(q["attention_recall"]["mean"].get<double>(), 0.5);
}

TEST(BudgetEdges, BudgetAboveTheContextIsFullAttention) {
  for (const auto& [policy, set] : {std::pair{"quest", "quest.budget_tokens=100000000"},
                                    std::pair{"snapkv", "snapkv.budget_tokens=100000000"}}) {
    const auto q = quality(policy, set);
    // Decode row i of 64 sees 449 + i tokens: mean 480.5.
    EXPECT_DOUBLE_EQ(q["tokens_attended"]["mean"].get<double>(), 480.5) << policy;
    EXPECT_GT(q["attention_recall"]["min"].get<double>(), 0.9999) << policy;
    EXPECT_DOUBLE_EQ(q["topk_recall"]["min"].get<double>(), 1.0) << policy;
    EXPECT_LT(q["output_error"]["max"].get<double>(), 1e-4) << policy;
  }
}

TEST(BudgetEdges, ZeroBudgetIsRefusedWithTheRange) {
  const auto r = test::run_kvsim("replay '" + edge_trace() + "' --policy quest --set quest.budget_tokens=0");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("budget_tokens"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1 .. 100000000"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace kvsim
