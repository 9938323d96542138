#include "sim/timeline.hpp"

namespace kvsim::sim {

void append_timeline(nlohmann::json& events, int pid, const std::string& label, const StepGraph& g,
                     const SimTiming& t, const std::vector<double>& capacity,
                     const std::vector<std::string>& resource_names) {
  using nlohmann::json;
  std::string critical;
  for (size_t i : t.critical_path) critical += (critical.empty() ? "" : " -> ") + g.phase(i).name;
  events.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", pid}, {"args", {{"name", label}}}});
  events.push_back({{"ph", "M"}, {"name", "process_labels"}, {"pid", pid}, {"args", {{"labels", "critical path: " + critical}}}});
  const int launch_tid = 0;
  events.push_back({{"ph", "M"}, {"name", "thread_name"}, {"pid", pid}, {"tid", launch_tid}, {"args", {{"name", "launch"}}}});
  for (size_t r = 0; r < resource_names.size(); ++r)
    events.push_back({{"ph", "M"}, {"name", "thread_name"}, {"pid", pid}, {"tid", int(r) + 1},
                      {"args", {{"name", resource_names[r]}}}});
  constexpr double kUs = 1e6;  // trace-event timestamps are microseconds
  for (size_t i = 0; i < g.size(); ++i) {
    const SimPhase& p = g.phase(i);
    const double flow_start = t.start[i] + p.latency;
    if (p.latency > 0)
      events.push_back({{"ph", "X"}, {"name", p.name}, {"pid", pid}, {"tid", launch_tid}, {"ts", t.start[i] * kUs},
                        {"dur", p.latency * kUs}});
    for (size_t r = 0; r < p.amount.size(); ++r) {
      if (p.amount[r] <= 0) continue;
      const double dur = t.finish[i] - flow_start;
      events.push_back({{"ph", "X"}, {"name", p.name}, {"pid", pid}, {"tid", int(r) + 1}, {"ts", flow_start * kUs},
                        {"dur", dur * kUs},
                        {"args", {{"amount", p.amount[r]}, {"utilization", dur > 0 ? p.amount[r] / (capacity[r] * dur) : 0.0}}}});
    }
  }
}

}  // namespace kvsim::sim
