// Capacity planning against a target (sweep/target_search, docs/planning.md): the search (staircase
// bisection over budgets, Pareto pruning, bisection over the batch) returns exactly what a
// brute-force evaluation of every grid point and every batch returns, with far fewer quality
// evaluations; answers name their binding constraint; "no feasible configuration" names what fails.
#include <gtest/gtest.h>

#include <cmath>

#include "core/error.hpp"
#include "model/library.hpp"
#include "sweep/target_search.hpp"
#include "test_util.hpp"
#include "policies/registry.hpp"

using namespace kvsim;
using namespace kvsim::sweep;

namespace {
struct World {
  GpuSpec gpu = test::gpu("h100-sxm");
  HostSpec host = test::host("sapphire-rapids-2s");
  ModelConfig model = test::model("llama-3.1-8b");
  Calibration cal;
  Deployment dep = make_deployment(model, gpu, host, cal);
};
World& world() {
  static World w;
  return w;
}

// A monotone stand-in for replayed quality: recall rises with every knob's position in its grid.
QualityFn synthetic_quality(const std::vector<Knob>& knobs) {
  return [knobs](const Policy&, const ParamValues& v) {
    double s = 0;
    for (const Knob& k : knobs) {
      const auto it = std::find(k.values.begin(), k.values.end(), v[size_t(k.param)]);
      s += double(it - k.values.begin() + 1) / double(k.values.size());
    }
    QualityValue q;
    q.recall = knobs.empty() ? 1.0 : 1 - std::exp(-2.5 * s / double(knobs.size()));
    q.error = 1 - q.recall;
    return q;
  };
}

TargetProblem problem(const std::string& policy, Target t, int64_t context) {
  TargetProblem p;
  p.deployment = p.roofline = &world().dep;
  p.policy = find_policy(policy);
  p.base = p.policy->defaults();
  p.knobs = budget_knobs(*p.policy, context);
  p.context = context;
  p.output = 512;
  p.target = t;
  return p;
}
}  // namespace

TEST(TargetSearch, EqualsBruteForceOverTheSameSpace) {
  struct Case {
    const char* policy;
    Target::Kind kind;
    double value;
    double min_recall;
  };
  const Case cases[] = {
      {"quest", Target::Kind::tpot, 0.030, 0.80},      {"quest", Target::Kind::throughput, 200, 0.85},
      {"chess", Target::Kind::tpot, 0.025, 0.75},      {"chess", Target::Kind::throughput, 300, 0.90},
      {"streaming", Target::Kind::tpot, 0.050, 0.80},  {"snapkv", Target::Kind::throughput, 2000, 0.70},
      {"chunkkv", Target::Kind::tpot, 0.040, 0.85},    {"ctkvr", Target::Kind::tpot, 0.060, 0.80},
      {"sentencekv", Target::Kind::throughput, 50, 0.8},
  };
  int feasible = 0;
  for (const Case& c : cases) {
    Target t;
    t.kind = c.kind;
    t.value = c.value;
    t.min_recall = c.min_recall;
    const TargetProblem p = problem(c.policy, t, 32768);
    const QualityFn q = synthetic_quality(p.knobs);
    const TargetAnswer smart = plan_target(p, q);
    const TargetAnswer brute = plan_target_brute_force(p, q);
    SCOPED_TRACE(std::string(c.policy) + (c.kind == Target::Kind::tpot ? " tpot" : " throughput"));
    ASSERT_EQ(smart.feasible, brute.feasible) << smart.failure << " | " << brute.failure;
    if (!smart.feasible) continue;
    ++feasible;
    EXPECT_EQ(smart.params, brute.params);
    EXPECT_EQ(smart.batch, brute.batch);
    EXPECT_EQ(smart.estimate.tpot_s, brute.estimate.tpot_s);
    size_t grid = 1;
    for (const Knob& k : p.knobs) grid *= k.values.size();
    EXPECT_EQ(brute.quality_evaluations, int64_t(grid));
    if (grid > 4) {
      EXPECT_LT(smart.quality_evaluations, brute.quality_evaluations);
    }
    EXPECT_LT(smart.cost_evaluations, brute.cost_evaluations);
    // The answer meets the target and the floor.
    if (c.kind == Target::Kind::tpot) EXPECT_LE(smart.estimate.tpot_s, c.value);
    else EXPECT_GE(smart.estimate.throughput_tok_s, c.value);
    ASSERT_TRUE(smart.quality.has_value());
    EXPECT_GE(smart.quality->recall, c.min_recall);
  }
  EXPECT_GE(feasible, 6);
}

TEST(TargetSearch, NamesTheBindingConstraintAndSlack) {
  Target t;
  t.kind = Target::Kind::tpot;
  t.value = 1.0;  // a loose TPOT: memory binds at the largest batch
  const TargetProblem p = problem("full", t, 131072);
  const TargetAnswer a = plan_target(p, synthetic_quality({}));
  ASSERT_TRUE(a.feasible) << a.failure;
  EXPECT_EQ(a.batch, a.estimate.memory.max_batch);
  EXPECT_NE(a.binding.find("HBM capacity"), std::string::npos) << a.binding;
  bool hbm_bw = false;
  for (const Limit& l : a.limits) {
    EXPECT_GE(l.slack, -1e-9) << l.name;
    hbm_bw |= l.name == "HBM bandwidth";
  }
  EXPECT_TRUE(hbm_bw);
  // A tight TPOT: the batch stops below the memory limit, and the step's bottleneck is named.
  TargetProblem q = p;
  q.target.value = a.estimate.tpot_s * 0.8;
  const TargetAnswer b = plan_target(q, synthetic_quality({}));
  ASSERT_TRUE(b.feasible) << b.failure;
  EXPECT_LT(b.batch, a.batch);
  EXPECT_NE(b.binding.find("TPOT target"), std::string::npos) << b.binding;
}

TEST(TargetSearch, NoFeasibleConfigurationSaysWhatFails) {
  Target t;
  t.kind = Target::Kind::tpot;
  t.value = 1e-5;
  TargetAnswer a = plan_target(problem("full", t, 32768), synthetic_quality({}));
  EXPECT_FALSE(a.feasible);
  EXPECT_NE(a.failure.find("TPOT:"), std::string::npos) << a.failure;
  t.value = 1.0;
  t.min_recall = 0.999;  // the synthetic recall tops out at 1 - e^-2.5
  TargetProblem p = problem("quest", t, 32768);
  a = plan_target(p, synthetic_quality(p.knobs));
  EXPECT_FALSE(a.feasible);
  EXPECT_NE(a.failure.find("quality: no budget on the grid meets the floor"), std::string::npos) << a.failure;
  t.kind = Target::Kind::throughput;
  t.value = 1e9;
  t.min_recall.reset();
  a = plan_target(problem("quest", t, 32768), synthetic_quality({}));
  EXPECT_FALSE(a.feasible);
  EXPECT_NE(a.failure.find("memory-limited"), std::string::npos) << a.failure;
}

TEST(TargetPlanCli, TableShowsRooflineBoundAndBinding) {
  const auto r = test::run_kvsim("plan scenarios/example.yaml --context 32768 --policy full --policy quest --target-tpot 30");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("TPOT ms (bound)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("binding:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("the ideal roofline"), std::string::npos) << r.out;
  const auto e = test::run_kvsim("plan --target-tpot 30 --min-recall 0.9");
  EXPECT_EQ(e.exit_code, 2) << e.out;
  EXPECT_NE(e.out.find("needs --trace"), std::string::npos) << e.out;
  const auto k = test::run_kvsim("plan --target-tpot 30 --knob chess.rho_page=0.2,0.1");
  EXPECT_EQ(k.exit_code, 2) << k.out;
  EXPECT_NE(k.out.find("--knob: 'chess.rho_page=0.2,0.1': values must ascend"), std::string::npos) << k.out;
  const auto r2 = test::run_kvsim("plan --target-tpot 30 --knob chess.rho_pag=0.1");
  EXPECT_EQ(r2.exit_code, 2) << r2.out;
  EXPECT_NE(r2.out.find("has no parameter 'rho_pag'"), std::string::npos) << r2.out;
}
