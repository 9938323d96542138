// Decode steps as the simulator lays them out, written as Chrome trace-event JSON (open in Perfetto):
// one process per step, one node per phase and layer on its stream, with its dependencies
// (model/decode_graph.hpp, sim/timeline.hpp). `kvsim plan --timeline` and `kvsim replay --timeline`.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/deployment.hpp"
#include "model/plan.hpp"

namespace kvsim {

struct TimelineStep {
  const PlanResult* result = nullptr;  // an infeasible result keeps its process id but draws nothing
  std::string title;                   // e.g. "chess decode step"; ", context N, batch B" is appended
};

// The mean decode step of each feasible result (half the output generated).
nlohmann::json decode_timeline_json(const Deployment& d, const std::vector<TimelineStep>& steps);

}  // namespace kvsim
