// The discrete-event simulator: max–min fair sharing and the event loop over a phase DAG.
#include <gtest/gtest.h>

#include <random>
#include <stdexcept>

#include "model/plan.hpp"
#include "sim/fair_share.hpp"
#include "model/resources.hpp"
#include "sim/step_graph.hpp"
#include "sim/timeline.hpp"
#include "test_util.hpp"
#include "policies/registry.hpp"

using namespace kvsim;
using namespace kvsim::sim;

TEST(FairShare, TextbookCases) {
  // Two flows that each fill one resource alone get half each.
  auto x = max_min_fair({10}, {Flow{{10}}, Flow{{10}}});
  EXPECT_DOUBLE_EQ(x[0], 0.5);
  EXPECT_DOUBLE_EQ(x[1], 0.5);
  // Flows on different resources do not slow each other.
  x = max_min_fair({10, 5}, {Flow{{10, 0}}, Flow{{0, 5}}});
  EXPECT_DOUBLE_EQ(x[0], 1.0);
  EXPECT_DOUBLE_EQ(x[1], 1.0);
  // A and B share R1 and stop at 1/2; C, only on R2 with B, takes the rest of R2 up to its solo speed.
  x = max_min_fair({1, 1}, {Flow{{1, 0}}, Flow{{1, 1}}, Flow{{0, 0.1}}});
  EXPECT_DOUBLE_EQ(x[0], 0.5);
  EXPECT_DOUBLE_EQ(x[1], 0.5);
  EXPECT_DOUBLE_EQ(x[2], 1.0);
}

// One flow alone (the solver's own shortcut for the common event with one transfer in flight): at its solo
// speed when every resource holds it, else slowed to the tightest resource's capacity over its use.
TEST(FairShare, OneFlowAloneIsLimitedByItsTightestResource) {
  EXPECT_DOUBLE_EQ(max_min_fair({10}, {Flow{{4}}})[0], 1.0);
  EXPECT_DOUBLE_EQ(max_min_fair({10}, {Flow{{20}}})[0], 0.5);
  EXPECT_DOUBLE_EQ(max_min_fair({10, 10, 10}, {Flow{{20, 0, 40}}})[0], 0.25);
  EXPECT_DOUBLE_EQ(max_min_fair({10, 1}, {Flow{{5, 0}}})[0], 1.0);
}

// On random instances the result is feasible and max–min optimal: every flow is at its solo speed or
// uses a saturated resource on which no other flow is faster.
TEST(FairShare, RandomInstancesAreFeasibleAndMaxMinOptimal) {
  std::mt19937 rng(42);
  std::uniform_real_distribution<double> u(0, 1);
  for (int trial = 0; trial < 500; ++trial) {
    const size_t R = 1 + rng() % 4, n = 1 + rng() % 6;
    std::vector<double> cap(R);
    for (auto& c : cap) c = 0.5 + u(rng);
    std::vector<Flow> flows(n);
    for (auto& f : flows) {
      f.use.resize(R);
      for (size_t r = 0; r < R; ++r) f.use[r] = u(rng) < 0.4 ? 0.0 : u(rng) * cap[r];  // alone: fits
    }
    const auto x = max_min_fair(cap, flows);
    std::vector<double> load(R, 0);
    for (size_t i = 0; i < n; ++i)
      for (size_t r = 0; r < R; ++r) load[r] += flows[i].use[r] * x[i];
    for (size_t r = 0; r < R; ++r) ASSERT_LE(load[r], cap[r] * (1 + 1e-9)) << "trial " << trial;
    for (size_t i = 0; i < n; ++i) {
      ASSERT_GE(x[i], 0);
      ASSERT_LE(x[i], 1 + 1e-12);
      if (x[i] >= 1 - 1e-9) continue;
      bool bottlenecked = false;
      for (size_t r = 0; r < R; ++r) {
        if (flows[i].use[r] <= 0 || load[r] < cap[r] * (1 - 1e-9)) continue;
        bool fastest = true;
        for (size_t j = 0; j < n; ++j)
          if (flows[j].use[r] > 0 && x[j] > x[i] + 1e-9) fastest = false;
        bottlenecked |= fastest;
      }
      ASSERT_TRUE(bottlenecked) << "trial " << trial << ": flow " << i << " at " << x[i] << " could go faster";
    }
  }
}

// Utilization is the moved amount over capacity x makespan; the critical path follows the dependency
// chain that releases the last phase, not phases that ran beside it.
TEST(StepGraph, UtilizationAndCriticalPath) {
  StepGraph g(2);
  const size_t load = g.add_phase({"load", 0, {0, 2}});       // 2 s on the link
  const size_t attend = g.add_phase({"attend", 0, {3, 0}});   // 3 s of compute, after load
  const size_t side = g.add_phase({"side", 0, {1, 0}});       // independent, shares compute with attend
  g.add_edge(load, attend);
  const auto t = g.run({1, 1});
  // side runs alone on compute during [0,1] (load is on the link), attend starts at 2 alone: makespan 5.
  EXPECT_NEAR(t.finish[side], 1, 1e-12);
  EXPECT_NEAR(t.makespan, 5, 1e-12);
  EXPECT_NEAR(t.utilization[0], 4.0 / 5, 1e-12);
  EXPECT_NEAR(t.utilization[1], 2.0 / 5, 1e-12);
  EXPECT_EQ(t.critical_path, (std::vector<size_t>{load, attend}));
}

TEST(StepGraph, APhaseAloneTakesItsRoofline) {
  StepGraph g(2);
  g.add_phase({"p", 3e-6, {4e12, 2e9}});  // 4 TFLOP at 1000 TFLOP/s = 4 ms; 2 GB at 2 TB/s = 1 ms
  const auto t = g.run({1000e12, 2e12});
  EXPECT_DOUBLE_EQ(t.makespan, 3e-6 + 4e-3);
}

TEST(StepGraph, ChainsAddAndIndependentPhasesShare) {
  {
    StepGraph g(1);
    const size_t a = g.add_phase({"a", 0, {1}}), b = g.add_phase({"b", 0, {3}});
    g.add_edge(a, b);
    const auto t = g.run({1});
    EXPECT_DOUBLE_EQ(t.makespan, 4);
    EXPECT_DOUBLE_EQ(t.start[b], 1);
  }
  {
    // Same resource, no edge: they share it, and together take the sum of their bytes / bandwidth.
    StepGraph g(1);
    g.add_phase({"a", 0, {1}});
    g.add_phase({"b", 0, {3}});
    const auto t = g.run({1});
    EXPECT_NEAR(t.finish[0], 2, 1e-12);  // half speed until a is done
    EXPECT_NEAR(t.makespan, 4, 1e-12);
  }
  {
    // Different resources (a copy under a kernel): perfect overlap, the longer one decides.
    StepGraph g(2);
    g.add_phase({"kernel", 0, {5, 0}});
    g.add_phase({"copy", 0, {0, 2}});
    EXPECT_DOUBLE_EQ(g.run({1, 1}).makespan, 5);
  }
  {
    StepGraph g(1);
    const size_t a = g.add_phase({"a", 0, {1}}), b = g.add_phase({"b", 0, {1}});
    g.add_edge(a, b);
    g.add_edge(b, a);
    EXPECT_THROW(g.run({1}), std::invalid_argument);
  }
}

// A graph laid out again in the same storage (reset, as the planner does for every step) runs its new
// phases and edges, prepared or not; prepare keeps its rows only while the edges are the same, and
// finds a cycle as run does.
TEST(StepGraph, AGraphLaidOutAgainRunsItsNewEdges) {
  StepGraph g(1);
  auto lay_out = [&](bool chain, double b_amount) {
    g.reset();
    const size_t a = g.add_phase({"a", 0, {1}}), b = g.add_phase({"b", 0, {b_amount}});
    if (chain) g.add_edge(a, b);
  };
  lay_out(true, 3);
  g.prepare();
  EXPECT_DOUBLE_EQ(g.run({1}).makespan, 4);
  lay_out(false, 3);  // the phases share the resource now
  g.prepare();
  EXPECT_NEAR(g.run({1}).finish[0], 2, 1e-12);
  lay_out(true, 5);   // the same edges as the first graph, new amounts
  g.prepare();
  EXPECT_DOUBLE_EQ(g.run({1}).makespan, 6);
  g.add_edge(1, 0);   // a cycle after prepare: prepare is undone, and run and prepare both refuse
  EXPECT_THROW(g.run({1}), std::invalid_argument);
  EXPECT_THROW(g.prepare(), std::invalid_argument);
  EXPECT_EQ(g.size(), 2u);
}

// The full-KV decode step, run as a single-stream chain through the simulator, takes exactly the
// planner's summed roofline time.
TEST(StepGraph, FullDecodeChainMatchesThePlanner) {
  const ModelConfig m = test::model("llama-3.1-8b");
  const GpuSpec g = test::gpu("h100-sxm");
  const HostSpec h = test::host("xeon-w9-3495x");
  Calibration cal;
  cal.per_kind[size_t(PhaseKind::attention)].of[size_t(Ceiling::hbm)] = 0.7;
  const Deployment d = make_deployment(m, g, h, cal, {.tensor_parallel = 2});
  const Policy* full = find_policy("full");
  std::vector<PhaseResult> phases;
  const double planned = decode_step_seconds(d, *full, full->defaults(), 8, 20000, &phases);
  StepGraph sg(size_t(Resource::count));
  size_t prev = SIZE_MAX;
  for (const auto& p : phases) {
    const size_t id = sg.add_phase(to_sim_phase(p.phase, d.machine));
    if (prev != SIZE_MAX) sg.add_edge(prev, id);
    prev = id;
  }
  EXPECT_NEAR(sg.run(capacities(d.machine)).makespan, planned, planned * 1e-12);
}

// A host phase on fewer threads than the host has cores is limited by its own threads, not by a shared
// resource: alone in the simulator it still takes exactly its roofline time, and beside another host
// phase it leaves the rest of the host's DRAM bandwidth to it.
TEST(StepGraph, AThreadLimitedHostPhaseAloneTakesItsRoofline) {
  const ModelConfig m = test::model("llama-3.1-8b");
  const GpuSpec g = test::gpu("h100-sxm");
  const HostSpec h = test::host("xeon-w9-3495x");
  Calibration cal;
  cal.host_threads = {.call_s = 0.3e-6, .region_s = 20e-6, .core_dram = 15e9};
  const Deployment d = make_deployment(m, g, h, cal);
  Phase p{"cpu_rerank", PhaseKind::host_kernel, Device::cpu, ComputeUnit::host,
          {.flops = 2e9, .dram_bytes = 3e9, .launches = 64}};
  p.stream = Stream::host;
  p.lanes = 8;  // 8 of 56 cores: 8 x 15 GB/s, well under the host's 307 GB/s
  const PhaseTime rt = roofline(p, d.machine);
  EXPECT_EQ(rt.bound, Bound::dram);
  EXPECT_DOUBLE_EQ(rt.seconds, 3e9 / (8 * 15e9) + 20e-6 + 64 * 0.3e-6 / 8);
  StepGraph alone(size_t(Resource::count));
  alone.add_phase(to_sim_phase(p, d.machine));
  EXPECT_NEAR(alone.run(capacities(d.machine)).makespan, rt.seconds, rt.seconds * 1e-12);
  // Two such phases side by side use 2 x 120 GB/s of the 307 GB/s: neither slows the other.
  StepGraph two(size_t(Resource::count));
  two.add_phase(to_sim_phase(p, d.machine));
  two.add_phase(to_sim_phase(p, d.machine));
  EXPECT_NEAR(two.run(capacities(d.machine)).makespan, rt.seconds, rt.seconds * 1e-12);
}

// The Chrome timeline's `launch` track shows a phase's fixed latency; a phase without one (a copy queued
// behind another, a host phase) has no slice there, not a slice of zero length.
TEST(Timeline, OnlyPhasesWithALatencyHaveALaunchSlice) {
  StepGraph g(1);
  SimPhase a;
  a.name = "with_latency", a.latency = 5e-6, a.amount = {1.0};
  SimPhase b;
  b.name = "without", b.latency = 0, b.amount = {2.0};
  const size_t ia = g.add_phase(a), ib = g.add_phase(b);
  g.add_edge(ia, ib);
  const std::vector<double> cap = {1e6};
  const SimTiming t = g.run(cap);
  nlohmann::json events = nlohmann::json::array();
  append_timeline(events, 1, "test", g, t, cap, {"hbm"});
  std::vector<std::string> launch, hbm;
  for (const auto& e : events) {
    if (e["ph"] != "X") continue;
    (e["tid"] == 0 ? launch : hbm).push_back(e["name"]);
    EXPECT_GT(e["dur"].get<double>(), 0) << e.dump();
  }
  EXPECT_EQ(launch, (std::vector<std::string>{"with_latency"}));
  EXPECT_EQ(hbm, (std::vector<std::string>{"with_latency", "without"}));
}
