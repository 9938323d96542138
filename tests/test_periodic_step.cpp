// The periodic step simulation (sim/periodic_step.hpp, issue 29 item 1) against the full event loop,
// its oracle: on random decode steps (policies, models, contexts, batches, TP degrees, GPUs, hosts and
// implementation profiles, eager dispatch included) every phase's start and finish, the makespan and
// every resource's busy time agree to 1e-9 relative; where no period exists it falls back to the full
// loop and counts why.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/yaml_reader.hpp"
#include "model/decode_graph.hpp"
#include "model/plan.hpp"
#include "model/resources.hpp"
#include "model/scenario.hpp"
#include "model/step_simulation.hpp"
#include "policies/registry.hpp"
#include "sim/periodic_step.hpp"
#include "test_util.hpp"

#include <nlohmann/json.hpp>

namespace kvsim {
namespace {

bool close(double a, double b, double rel) { return std::abs(a - b) <= rel * std::max(std::abs(a), std::abs(b)); }

// Every number run_periodic reports equals the full loop's to `rel`; the busy time of a resource is
// its utilization times the makespan (times its capacity, the same on both sides).
void expect_same(const sim::SimTiming& fast, const sim::SimTiming& full, double rel, const std::string& what) {
  ASSERT_EQ(fast.start.size(), full.start.size()) << what;
  EXPECT_TRUE(close(fast.makespan, full.makespan, rel)) << what << ": " << fast.makespan << " vs " << full.makespan;
  size_t bad = 0;
  std::string first_bad;
  for (size_t i = 0; i < full.start.size(); ++i) {
    const bool b = !close(fast.start[i], full.start[i], rel) || !close(fast.finish[i], full.finish[i], rel);
    if (b && first_bad.empty())
      first_bad = "phase " + std::to_string(i) + ": " + std::to_string(fast.start[i]) + "-" + std::to_string(fast.finish[i]) +
                  " vs " + std::to_string(full.start[i]) + "-" + std::to_string(full.finish[i]);
    bad += b;
  }
  EXPECT_EQ(bad, 0u) << what << "; first " << first_bad;
  for (size_t r = 0; r < full.utilization.size(); ++r)
    EXPECT_TRUE(close(fast.utilization[r] * fast.makespan, full.utilization[r] * full.makespan, rel)) << what << " resource " << r;
}

struct Case {
  std::string yaml, label;
};

template <class T>
const T& pick(std::mt19937_64& rng, const std::vector<T>& v) {
  return v[std::uniform_int_distribution<size_t>(0, v.size() - 1)(rng)];
}

Case random_case(std::mt19937_64& rng, const std::string& policy) {
  const std::vector<std::string> gpus{"h100-sxm", "a100-80g", "l40s", "h200", "rtx4090", "h20"};
  const std::vector<std::string> hosts{"xeon-w9-3495x", "sapphire-rapids-2s", "ci-2core"};
  const std::vector<std::string> models{"llama-3.1-8b", "qwen2.5-14b", "mistral-7b", "llama-3.2-3b", "smollm2-135m", "qwen3-8b"};
  const std::vector<int> tps{1, 1, 2, 4};
  const std::vector<std::string> impls{
      "",
      "implementation: {dispatch: eager, ops_per_layer: 55, kernels_per_layer: 36, ops_per_step: 27, "
      "kernels_per_step: 17, dispatch_us: 4.0}\n",
      "implementation: {kv_append: concat, dispatch: eager, ops_per_layer: 60, kernels_per_layer: 39, "
      "ops_per_step: 36, kernels_per_step: 16, dispatch_us: 2.97, sync_per_layer: true, ops_before_sync: 42, "
      "kernels_before_sync: 24, ops_before_layers: 20, kernels_before_layers: 8}\n",
      "implementation: {attention: repeat_kv, kv_expand_gqa: true}\n"};
  const int64_t ctx = std::uniform_int_distribution<int64_t>(1024, 131072)(rng);
  const int64_t batch = std::uniform_int_distribution<int64_t>(1, 64)(rng);
  const std::string impl = pick(rng, impls);
  const std::string gpu = pick(rng, gpus), host = pick(rng, hosts), model = pick(rng, models);
  const int tp = pick(rng, tps);
  Case c;
  c.yaml = "hardware: " + gpu + "\nhost: " + host + "\nmodel: " + model + "\n" +
           (std::uniform_int_distribution<int>(0, 1)(rng) ? "calibration: roofline\n" : "") +
           "workload: {context_tokens: " + std::to_string(ctx) + ", output_tokens: 64, batch: " + std::to_string(batch) +
           ", tensor_parallel: " + std::to_string(tp) + ", cuda_graphs: " + (impl.find("eager") != std::string::npos ? "false" : "true") +
           ", allow_long_context: true}\npolicies: [" + policy + "]\n" + impl;
  c.label = policy + " " + gpu + " " + host + " " + model + " ctx " + std::to_string(ctx) + " batch " +
            std::to_string(batch) + " tp " + std::to_string(tp) + (impl.empty() ? std::string() : std::string(" ") + impl.substr(0, 40));
  return c;
}

// The phase of the whole graph (`layers` layers) that phase i of the short graph `g` stands for
// (sim::PeriodicReport::shifted_from).
size_t stands_for(const sim::DecodeGraph& g, size_t i, int layers, int shifted_from) {
  size_t first = 0, count = 0;
  int built = 0;
  for (size_t k = 0; k < g.layer.size(); ++k)
    if (g.layer[k] >= 0) first = count++ == 0 ? k : first, built = std::max(built, g.layer[k] + 1);
  const size_t per = count / size_t(built), extra = size_t(layers - built) * per;
  const bool after = g.layer[i] < 0 ? i > first : g.layer[i] >= shifted_from;
  return after ? i + extra : i;
}

TEST(PeriodicStep, EqualsTheFullSimulationOnRandomSteps) {
  std::mt19937_64 rng(29);
  std::vector<std::string> policies;
  for (const Policy* p : all_policies()) policies.emplace_back(p->name());
  size_t compared = 0, extrapolated = 0, short_graph = 0, skipped = 0;
  for (int trial = 0; trial < 1000; ++trial) {
    const Case c = random_case(rng, pick(rng, policies));
    Scenario s;
    try {
      s = load_scenario(load_yaml_string(c.yaml, "p.yaml"), "p.yaml", policy_catalog());
    } catch (const std::exception&) {
      ++skipped;  // e.g. a TP degree that does not divide the model's heads
      continue;
    }
    const Deployment d = make_deployment(s);
    const PolicyChoice& pc = s.policies[0];
    PhaseList pol, dense;
    decode_phase_lists(d, *pc.policy, pc.params, StepShape{double(s.workload.batch > 0 ? s.workload.batch : 1),
                                                           double(s.workload.context_tokens[0]), 32},
                       pol, dense);
    const int L = d.model->layers;
    const sim::DecodeGraph g = sim::build_decode_graph(pol, dense, L, d.machine);
    const auto cap = sim::capacities(d.machine);
    const auto cp = sim::couplings(d.machine);
    const sim::SimTiming full = g.graph.run(cap, cp);
    // The whole graph through the shortcut: every phase.
    sim::PeriodicReport how;
    expect_same(g.graph.run_periodic(cap, cp, g.layer, &how), full, 1e-9, c.label);
    // The short graph standing for the whole one (what decode_step runs): the makespan, the busy time
    // of every resource and each phase of the short graph at the place it stands for.
    const sim::SimulatedStep step = sim::simulate_decode_step(pol, dense, L, d.machine);
    // What the planner asks for (the makespan alone) is the same number, bit for bit.
    EXPECT_EQ(sim::simulate_decode_step(pol, dense, L, d.machine, sim::Detail::makespan).timing.makespan,
              step.timing.makespan)
        << c.label;
    if (step.built_layers < L) {
      ++short_graph;
      const sim::DecodeGraph sg = sim::build_decode_graph(pol, dense, step.built_layers, d.machine);
      ASSERT_EQ(sg.graph.size(), step.timing.start.size());
      sim::SimTiming mapped = full;
      for (size_t i = 0; i < sg.graph.size(); ++i) {
        const size_t j = stands_for(sg, i, L, step.report.shifted_from);
        ASSERT_EQ(sg.graph.phase(i).name, g.graph.phase(j).name) << c.label;
        mapped.start[j] = step.timing.start[i], mapped.finish[j] = step.timing.finish[i];
      }
      mapped.makespan = step.timing.makespan;
      mapped.utilization = step.timing.utilization;
      expect_same(mapped, full, 1e-9, c.label + " (short graph)");
    } else {
      expect_same(step.timing, full, 1e-9, c.label + " (whole graph)");
    }
    ++compared;
    extrapolated += how.outcome == sim::PeriodicOutcome::extrapolated;
  }
  // The property is only shown if the shortcut is taken on most of the steps.
  EXPECT_GT(compared, 800u);
  EXPECT_GT(extrapolated, compared / 2) << extrapolated << " of " << compared;
  EXPECT_GT(short_graph, compared / 2) << short_graph << " of " << compared;
  std::printf("periodic step: %zu random steps compared, %zu extrapolated on the whole graph, %zu on a %d-layer graph, "
              "%zu scenarios rejected\n",
              compared, extrapolated, short_graph, sim::kShortcutLayers, skipped);
}

// Small graphs of `layers` copies of: a GPU phase, then a copy on a second resource that also takes a
// little of the first (so the two share it while they overlap). Unless `detached`, a GPU phase waits
// for the copy of the layer before last: the copies may run one layer behind, no more.
// `vary(l)` scales layer l's GPU work.
struct Toy {
  sim::StepGraph g{2};
  std::vector<int> layer;
  template <class Vary>
  Toy(int layers, bool detached, double copy_bytes, Vary vary) {
    std::vector<size_t> gpu, copy;
    for (int l = 0; l < layers; ++l) {
      gpu.push_back(g.add_phase({"gpu", 1e-6, {1e9 * vary(l), 0}}));
      copy.push_back(g.add_phase({"copy", 0, {1e8, copy_bytes}}));
      layer.insert(layer.end(), {l, l});
      if (l > 0) g.add_edge(gpu[size_t(l) - 1], gpu.back()), g.add_edge(copy[size_t(l) - 1], copy.back());
      if (!detached && l >= 2) g.add_edge(copy[size_t(l) - 2], gpu.back());
      g.add_edge(gpu.back(), copy.back());
    }
    const size_t head = g.add_phase({"head", 0, {1e8, 0}});
    layer.push_back(-1);
    g.add_edge(gpu.back(), head);
    g.add_edge(copy.back(), head);
  }
  Toy(int layers, bool detached, double copy_bytes) : Toy(layers, detached, copy_bytes, [](int) { return 1.0; }) {}
  sim::PeriodicOutcome run_both(sim::SimTiming& fast, sim::SimTiming& full) const {
    sim::PeriodicReport how;
    fast = g.run_periodic({1e12, 1e9}, {}, layer, &how);
    full = g.run({1e12, 1e9});
    return how.outcome;
  }
};

TEST(PeriodicStep, ExtrapolatesAPipelineExactly) {
  // Copies slower than the GPU phases (1.5 ms against 1 ms, one layer of slack), faster, and a model
  // whose first layers differ (the period starts after them).
  for (const Toy& t : {Toy(64, false, 1.5e6), Toy(64, false, 5e5), Toy(40, false, 1.2e6, [](int l) { return l < 5 ? 1.0 + l : 1.0; })}) {
    sim::SimTiming fast, full;
    const uint64_t before = sim::periodic_counters().extrapolated;
    EXPECT_EQ(t.run_both(fast, full), sim::PeriodicOutcome::extrapolated);
    EXPECT_EQ(sim::periodic_counters().extrapolated, before + 1);
    expect_same(fast, full, 1e-12, "pipeline");
  }
}

TEST(PeriodicStep, FallsBackWithoutALayerStructure) {
  // One layer, three (too few to find and copy a period), and phases that change every layer.
  for (const Toy& t : {Toy(1, false, 5e5), Toy(3, false, 5e5), Toy(32, false, 5e5, [](int l) { return 1.0 + 0.01 * l; })}) {
    const uint64_t before = sim::periodic_counters().no_layer_structure;
    sim::SimTiming fast, full;
    EXPECT_EQ(t.run_both(fast, full), sim::PeriodicOutcome::no_layer_structure);
    EXPECT_EQ(sim::periodic_counters().no_layer_structure, before + 1);
    EXPECT_EQ(fast.makespan, full.makespan);
    EXPECT_EQ(fast.finish, full.finish);
  }
}

TEST(PeriodicStep, FallsBackWhenABacklogGrowsEveryLayer) {
  // The detached copies (2 ms each) fall further behind the GPU phases (1 ms) every layer: the state
  // at a layer boundary never repeats.
  Toy t(32, true, 2e6);
  const uint64_t before = sim::periodic_counters().no_period;
  sim::SimTiming fast, full;
  EXPECT_EQ(t.run_both(fast, full), sim::PeriodicOutcome::no_period);
  EXPECT_EQ(sim::periodic_counters().no_period, before + 1);
  EXPECT_EQ(fast.makespan, full.makespan);
  EXPECT_EQ(fast.finish, full.finish);
}

TEST(PeriodicStep, TheFlagSelectsTheFullSimulation) {
  const Scenario s = load_scenario(load_yaml_string("hardware: h100-sxm\nhost: xeon-w9-3495x\nmodel: llama-3.1-8b\n"
                                                    "workload: {context_tokens: 32768, batch: 8}\npolicies: [ctkvr]\n",
                                                    "f.yaml"),
                                   "f.yaml", policy_catalog());
  const Deployment d = make_deployment(s);
  const PolicyChoice& pc = s.policies[0];
  const StepShape shape{8, 32768, 16};
  const uint64_t before = sim::periodic_counters().extrapolated;
  const double fast = decode_step(d, *pc.policy, pc.params, shape, false).seconds;
  EXPECT_EQ(sim::periodic_counters().extrapolated, before + 1);
  set_full_step_simulation(true);
  const double full = decode_step(d, *pc.policy, pc.params, shape, false).seconds;
  set_full_step_simulation(false);
  EXPECT_EQ(sim::periodic_counters().extrapolated, before + 1);  // the full loop does not count
  EXPECT_NEAR(fast, full, 1e-9 * full);
}

// KVSIM_FULL_STEP_SIM is read once per process, so each value is tried in a child: this test binary
// running only the probe below, which checks the flag against what the parent expects.
TEST(PeriodicStep, TheEnvironmentTurnsTheFullSimulationOnForAnyValueButZero) {
  const std::pair<const char*, bool> cases[] = {{"1", true}, {"yes", true}, {"0", false}, {"", false}};
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  for (const auto& [value, on] : cases) {
    std::string cmd = "KVSIM_FULL_STEP_SIM='";
    cmd += value;
    cmd += on ? "' KVSIM_EXPECT_FULL_STEP=1 '" : "' KVSIM_EXPECT_FULL_STEP=0 '";
    cmd += self;
    cmd += "' --gtest_filter=PeriodicStep.DISABLED_FullStepFlagProbe --gtest_also_run_disabled_tests >/dev/null 2>&1";
    EXPECT_EQ(std::system(cmd.c_str()), 0) << "KVSIM_FULL_STEP_SIM='" << value << "'";
  }
}

TEST(PeriodicStep, DISABLED_FullStepFlagProbe) {
  const char* want = std::getenv("KVSIM_EXPECT_FULL_STEP");
  ASSERT_NE(want, nullptr);
  EXPECT_EQ(full_step_simulation(), std::string_view(want) == "1");
}

}  // namespace
}  // namespace kvsim

TEST(PeriodicStep, TheCliFlagRunsTheFullSimulationWithTheSameAnswer) {
  const std::string a = testing::TempDir() + "kvsim-fast-step.json", b = testing::TempDir() + "kvsim-full-step.json";
  ASSERT_EQ(kvsim::test::run_kvsim("plan --format json -o '" + a + "'").exit_code, 0);
  const auto full = kvsim::test::run_kvsim("--full-step-sim plan --format json -o '" + b + "'");
  ASSERT_EQ(full.exit_code, 0) << full.out;
  const auto ja = nlohmann::json::parse(kvsim::test::read_text(a)), jb = nlohmann::json::parse(kvsim::test::read_text(b));
  ASSERT_EQ(ja["results"].size(), jb["results"].size());
  for (size_t i = 0; i < ja["results"].size(); ++i) {
    const double x = ja["results"][i]["tpot_ms"], y = jb["results"][i]["tpot_ms"];
    EXPECT_NEAR(x, y, 1e-9 * y) << ja["results"][i]["policy"];
  }
}

namespace kvsim {
namespace {

// A layout laid out again for a step of the same shape only fills its nodes' phases again
// (build_decode_graph's refill): it must equal a fresh layout of that step, node for node and in time.
TEST(DecodeGraphLayout, ARefilledLayoutEqualsAFreshOne) {
  std::mt19937_64 rng(31);
  std::vector<std::string> policies;
  for (const Policy* p : all_policies()) policies.emplace_back(p->name());
  sim::DecodeGraph kept{size_t(sim::Resource::count)};
  size_t refilled = 0, compared = 0;
  std::string policy = pick(rng, policies);
  for (int trial = 0; trial < 600; ++trial) {
    if (trial % 6 == 0) policy = pick(rng, policies);  // runs of one policy: most layouts are refills
    const Case c = random_case(rng, policy);
    Scenario s;
    try {
      s = load_scenario(load_yaml_string(c.yaml, "p.yaml"), "p.yaml", policy_catalog());
    } catch (const std::exception&) {
      continue;
    }
    const Deployment d = make_deployment(s);
    const PolicyChoice& pc = s.policies[0];
    PhaseList pol, dense;
    decode_phase_lists(d, *pc.policy, pc.params, StepShape{double(std::max<int64_t>(1, s.workload.batch)),
                                                           double(s.workload.context_tokens[0]), 32},
                       pol, dense);
    const sim::DecodeGraph fresh = sim::build_decode_graph(pol, dense, sim::kShortcutLayers, d.machine);
    const bool same_shape = kept.graph.size() > 0 && kept.shape == fresh.shape && fresh.shape.refillable;
    sim::build_decode_graph(kept, pol, dense, sim::kShortcutLayers, d.machine);
    refilled += same_shape;
    ASSERT_EQ(kept.graph.size(), fresh.graph.size()) << c.label;
    EXPECT_EQ(kept.layer, fresh.layer) << c.label;
    EXPECT_EQ(kept.source, fresh.source) << c.label;
    for (size_t i = 0; i < fresh.graph.size(); ++i) {
      const sim::SimPhase &a = kept.graph.phase(i), &b = fresh.graph.phase(i);
      ASSERT_EQ(a.name, b.name) << c.label << " node " << i;
      EXPECT_EQ(a.latency, b.latency) << c.label << " " << a.name;
      EXPECT_EQ(a.min_seconds, b.min_seconds) << c.label << " " << a.name;
      EXPECT_EQ(a.amount, b.amount) << c.label << " " << a.name;
    }
    // The edges, through the times they give: bit for bit.
    const auto cap = sim::capacities(d.machine);
    const auto cp = sim::couplings(d.machine);
    kept.graph.prepare();
    const sim::SimTiming a = kept.graph.run(cap, cp), b = fresh.graph.run(cap, cp);
    EXPECT_EQ(a.makespan, b.makespan) << c.label;
    EXPECT_EQ(a.finish, b.finish) << c.label;
    ++compared;
  }
  // Many random scenarios are rejected (a TP degree that does not divide the heads, a step that does
  // not fit); enough remain, and some of them are refills (an eager implementation is never refilled).
  EXPECT_GT(compared, 300u);
  EXPECT_GT(refilled, compared / 10) << "the refill path was not exercised";
}

}  // namespace
}  // namespace kvsim
