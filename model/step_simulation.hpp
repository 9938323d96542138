// A decode step's simulated time without laying out every layer: the graph is built with a few
// layers, timed by sim::StepGraph::run_periodic as the graph of all the model's layers it stands for
// (build_decode_graph lays out every layer between the first and the last alike, so a longer graph is
// this one with its repeating layers copied), and built whole and simulated whole only where that
// finds no period. tests/test_periodic_step.cpp holds it to the full simulation of the whole graph.
#pragma once
#include <vector>

#include "model/phase.hpp"
#include "model/roofline.hpp"
#include "sim/step_graph.hpp"

namespace kvsim::sim {

// The layers laid out for the shortcut: enough for a warm-up, two boundaries and the last layers.
inline constexpr int kShortcutLayers = 5;

struct SimulatedStep {
  SimTiming timing;       // of the graph that was built (see `built_layers`)
  PeriodicReport report;  // from the last run_periodic
  int built_layers = 0;   // kShortcutLayers, or the model's layers where the short graph found no period
};

// `detail`: Detail::makespan leaves the timing's utilization and critical path empty (a planner
// reads the makespan alone).
SimulatedStep simulate_decode_step(const std::vector<Phase>& policy_phases, const std::vector<Phase>& dense, int layers,
                                   const Machine& m, Detail detail = Detail::full);

}  // namespace kvsim::sim
