#include "model/step_timeline.hpp"

#include "model/decode_graph.hpp"
#include "model/resources.hpp"
#include "sim/timeline.hpp"

namespace kvsim {

nlohmann::json decode_timeline_json(const Deployment& d, const std::vector<TimelineStep>& steps) {
  nlohmann::json events = nlohmann::json::array();
  const auto cap = sim::capacities(d.machine);
  int pid = 0;
  for (const TimelineStep& step : steps) {
    ++pid;
    const PlanResult& r = *step.result;
    if (!r.feasible) continue;
    PhaseList pol, dense;
    decode_phase_lists(d, *r.policy, r.params,
                       StepShape{double(r.batch), double(r.context_tokens), double(r.output_tokens) / 2.0}, pol, dense);
    const sim::DecodeGraph g = sim::build_decode_graph(pol, dense, d.model->layers, d.machine);
    const std::string label =
        step.title + ", context " + std::to_string(r.context_tokens) + ", batch " + std::to_string(r.batch);
    sim::append_timeline(events, pid, label, g.graph, g.graph.run(cap, sim::couplings(d.machine)), cap,
                         sim::resource_names());
  }
  return {{"traceEvents", events}, {"displayTimeUnit", "ms"}};
}

}  // namespace kvsim
