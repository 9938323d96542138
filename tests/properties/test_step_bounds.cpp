// The simulator's bounds on a decode step (sim/, model/decode_graph.hpp), on generated scenarios:
//   max over resources of (the step's work on it / its capacity) <= step <= the serial sum of its nodes,
// every node takes at least its time alone, every resource is busy at most the step (utilization <= 1)
// and exactly the time its work needs at full capacity (busy time is conserved: utilization x capacity x
// step = the work), and the periodic shortcut equals the full simulation, busy times included.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "model/decode_graph.hpp"
#include "model/resources.hpp"
#include "model/step_simulation.hpp"
#include "tests/properties/plan_helpers.hpp"

using namespace kvsim;
using namespace kvsim::props;

namespace {
// A node's time alone: its latency, then its flow at full capacity, or its own rate limit.
double solo_seconds(const sim::SimPhase& p, const std::vector<double>& cap) {
  double flow = p.min_seconds;
  for (size_t r = 0; r < cap.size(); ++r)
    if (p.amount[r] > 0) flow = std::max(flow, p.amount[r] / cap[r]);
  return p.latency + flow;
}
}  // namespace

RC_GTEST_PROP(StepBounds, SlowestResourceLeStepLeSerialSum, ()) {
  const ScenarioSpec spec = *scenarios();
  const auto l = loaded(spec);
  const StepShape shape{double(spec.batch), double(spec.context), double(spec.output) / 2};
  PhaseList pp, dense;
  decode_phase_lists(l->d, l->policy(), l->params(), shape, pp, dense);
  const sim::DecodeGraph g = sim::build_decode_graph(pp, dense, l->s.model.layers, l->d.machine);
  const std::vector<double> cap = sim::capacities(l->d.machine);
  const sim::SimTiming t = g.graph.run(cap, sim::couplings(l->d.machine));
  const StepResult step = decode_step(l->d, l->policy(), l->params(), shape);
  RC_TAG(step.simulated ? "simulated" : "single stream");

  // The planner's step is the full simulation's (periodic shortcut exact; one stream: the sum).
  RC_ASSERT(near(step.seconds, t.makespan, 1e-9));
  double serial = 0;
  std::vector<double> work(cap.size(), 0.0);
  for (size_t i = 0; i < g.graph.size(); ++i) {
    const sim::SimPhase& p = g.graph.phase(i);
    const double alone = solo_seconds(p, cap);
    serial += alone;
    RC_ASSERT(le(alone, t.finish[i] - t.start[i]));  // sharing never speeds a node up
    for (size_t r = 0; r < cap.size(); ++r) work[r] += p.amount[r];
  }
  for (size_t r = 0; r < cap.size(); ++r) {
    RC_ASSERT(le(work[r] / cap[r], t.makespan));                              // the slowest resource
    RC_ASSERT(near(t.utilization[r] * cap[r] * t.makespan, work[r], 1e-9));  // busy time conserved
    RC_ASSERT(le(t.utilization[r], 1.0));
  }
  RC_ASSERT(le(t.makespan, serial));
  // The periodic shortcut (sim/periodic_step.hpp) simulates a few layers and accounts for the others
  // by copying their period: its busy time per resource must still be the whole step's work.
  const sim::SimulatedStep shortcut = sim::simulate_decode_step(pp, dense, l->s.model.layers, l->d.machine);
  RC_ASSERT(near(shortcut.timing.makespan, t.makespan, 1e-9));
  for (size_t r = 0; r < cap.size(); ++r)
    RC_ASSERT(near(shortcut.timing.utilization[r] * cap[r] * shortcut.timing.makespan, work[r], 1e-9));
  // The serial sum the plan prints is of the phases alone; an eager implementation's host dispatch
  // nodes are not phases, so only without them is it a bound (docs/robustness.md, "Properties").
  if (!l->d.machine.has_dispatch()) RC_ASSERT(le(step.seconds, step.serial_seconds));
}
