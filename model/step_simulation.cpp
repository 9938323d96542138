#include "model/step_simulation.hpp"

#include "model/decode_graph.hpp"
#include "model/resources.hpp"

namespace kvsim::sim {

SimulatedStep simulate_decode_step(const std::vector<Phase>& pol, const std::vector<Phase>& dense, int layers,
                                   const Machine& m, Detail detail) {
  const auto cap = capacities(m);
  const auto cp = couplings(m);
  SimulatedStep out;
  // One graph per thread, laid out again for every step: its storage outlives the step.
  thread_local DecodeGraph g{size_t(Resource::count)};
  if (layers > kShortcutLayers) {
    build_decode_graph(g, pol, dense, kShortcutLayers, m);
    g.graph.prepare();  // the same edges from step to step of a policy: rows and cycle check kept
    out.timing = g.graph.run_periodic(cap, cp, g.layer, &out.report, layers - kShortcutLayers, detail);
    out.built_layers = kShortcutLayers;
    if (out.report.outcome == PeriodicOutcome::extrapolated) return out;
  }
  build_decode_graph(g, pol, dense, layers, m);
  out.timing = g.graph.run_periodic(cap, cp, g.layer, &out.report, 0, detail);
  out.built_layers = layers;
  return out;
}

}  // namespace kvsim::sim
