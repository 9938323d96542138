#include "replay/device_report.hpp"

#include "core/format.hpp"

namespace kvsim::replay {

namespace {
std::string steps_text(const DeviceCheck& c, const char* where) {
  std::string s;
  for (const DeviceStep& st : c.steps)
    if (st.where == where) s += (s.empty() ? "" : ", ") + st.step;
  return s.empty() ? "-" : s;
}
bool within(const DeviceCheck& c) { return c.max_rel_error <= kDeviceOutputTolerance; }
}  // namespace

std::string device_timing_text(bool timing_meaningful) {
  // On the emulator the kernels run as fibers on the CPU: their time says nothing about a GPU.
  return timing_meaningful ? "per-phase GPU timing against the model is not implemented yet (kvsim validate --device "
                             "cuda times the kernels)"
                           : "not meaningful under emulation: none reported";
}

nlohmann::json device_json(const std::string& backend, const std::string& note, bool timing_meaningful) {
  return {{"backend", backend},
          {"note", note},
          {"output_tolerance", kDeviceOutputTolerance},
          {"timing", device_timing_text(timing_meaningful)}};
}

nlohmann::json device_check_json(const DeviceCheck& c) {
  nlohmann::json steps = nlohmann::json::array();
  for (const DeviceStep& s : c.steps)
    steps.push_back({{"step", s.step}, {"where", s.where}, {"calls", s.calls}, {"kernels", s.kernels}});
  return {{"backend", c.backend},
          {"selection_on_backend", c.selection_on_backend},
          {"selections", c.selections},
          {"id_lists", c.id_lists},
          {"mismatched_selections", c.mismatched},
          {"selections_identical", c.identical()},
          {"first_mismatch", c.first_mismatch.empty() ? nlohmann::json(nullptr) : nlohmann::json(c.first_mismatch)},
          {"outputs", c.outputs},
          {"max_rel_error", c.outputs > 0 ? nlohmann::json(c.max_rel_error) : nlohmann::json(nullptr)},
          {"outputs_within_tolerance", c.outputs > 0 ? nlohmann::json(within(c)) : nlohmann::json(nullptr)},
          {"steps", steps}};
}

std::string device_csv_header() { return ",device_selections_identical,device_max_rel_error"; }

std::string device_csv_fields(const DeviceCheck& c) {
  return std::string(",") + (c.identical() ? "1" : "0") + "," + (c.outputs > 0 ? fmt("%.9g", c.max_rel_error) : "");
}

std::string device_table(const std::vector<const PolicyReplay*>& policies, const std::string& note) {
  if (policies.empty() || !policies.front()->device) return "";
  const DeviceCheck& first = *policies.front()->device;
  std::string text = "device:   " + first.backend + (note.empty() ? "" : " (" + note + ")") +
                     "; timing: " + device_timing_text(first.timing_meaningful) + "\n";
  char buf[512];
  std::snprintf(buf, sizeof buf, "%-16s %10s %12s %12s  %s\n", "policy", "selections", "identical", "max rel.err",
                "steps on the device | on the host");
  text += buf;
  for (const PolicyReplay* p : policies) {
    const DeviceCheck& c = *p->device;
    const std::string ident = c.identical() ? "yes" : "no (" + std::to_string(c.mismatched) + ")";
    const std::string err = c.outputs > 0 ? fmt("%.2e", c.max_rel_error) + (within(c) ? "" : " !") : "n/a";
    std::string host = steps_text(c, "host");
    // A selector without kernels (full attention: every token 0..p) selects nothing to run anywhere; its
    // ids are written on the device for its attention (position_ids) and checked there.
    if (!c.selection_on_backend) host = "no selection kernels" + (host == "-" ? "" : ", " + host);
    std::snprintf(buf, sizeof buf, "%-16s %10lld %12s %12s  %s | %s\n", p->run.label.c_str(), (long long)c.selections,
                  ident.c_str(), err.c_str(), steps_text(c, "device").c_str(), host.c_str());
    text += buf;
    if (!c.first_mismatch.empty()) text += "  first differing selection: " + c.first_mismatch + "\n";
  }
  // Per policy and phase (step), the kernels that ran it: where, calls, kernel functions in launch order.
  text += "kernels per policy and phase:\n";
  for (const PolicyReplay* p : policies) {
    const DeviceCheck& c = *p->device;
    text += "  " + p->run.label +
            (c.selection_on_backend ? "" : " (no selection kernels; " + std::to_string(c.id_lists) + " id lists 0..p checked)") +
            "\n";
    for (const DeviceStep& st : c.steps)
      text += "    " + st.step + " [" + st.where + ", " + std::to_string(st.calls) + " calls]: " + st.kernels + "\n";
  }
  return text;
}

}  // namespace kvsim::replay
