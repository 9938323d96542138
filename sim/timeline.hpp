// Chrome trace-event timelines (open in Perfetto or chrome://tracing) of simulated steps: one process
// per plan result, one track per resource, one slice per phase on every resource it uses, plus a
// `launch` track for each phase's fixed latency.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sim/step_graph.hpp"

namespace kvsim::sim {

// Appends the events of one simulated graph to `events` as process `pid` named `label`.
// `resource_names` names each resource index (tracks appear in that order).
// Each slice's args give the amount moved and the resource's utilization over the slice
// (amount / (capacity x duration)): 1.0 on the phase's bound.
void append_timeline(nlohmann::json& events, int pid, const std::string& label, const StepGraph& g,
                     const SimTiming& t, const std::vector<double>& capacity,
                     const std::vector<std::string>& resource_names);

}  // namespace kvsim::sim
