#include "model/calibration.hpp"

#include <vector>

namespace kvsim {

Calibration::Calibration() {
  for (auto& e : per_kind) e.of.fill(1.0);
}

namespace {
std::vector<std::string> names_of(auto const& arr) { return {arr.begin(), arr.end()}; }

// Reads any ceilings present in `m` into `e` (absent ones keep their current value).
void read_efficiency(YamlMap m, Efficiency& e) {
  for (size_t i = 0; i < kCeilingNames.size(); ++i) {
    const std::string key(kCeilingNames[i]);
    e.of[i] = m.number(key, Range{0, 1, true}, e.of[i]);
  }
  m.finish();
}
}  // namespace

Calibration load_calibration(YamlMap m) {
  Calibration c;
  const std::string schema = m.choice("schema", {"kvsim.calibration/1"});
  (void)schema;
  c.name = m.string("name");
  c.description = m.string("description", "");
  Efficiency defaults;
  defaults.of.fill(1.0);
  if (m.has("efficiency")) read_efficiency(m.map("efficiency"), defaults);
  else m.node("efficiency");
  for (auto& e : c.per_kind) e = defaults;
  if (m.has("phases")) {
    YamlMap phases = m.map("phases");
    for (size_t k = 0; k < kPhaseKindNames.size(); ++k) {
      const std::string key(kPhaseKindNames[k]);
      if (phases.has(key)) read_efficiency(phases.map(key), c.per_kind[k]);
      else phases.node(key);
    }
    phases.finish();
  } else {
    m.node("phases");
  }
  if (m.has("gather_half_run_bytes")) {
    YamlMap g = m.map("gather_half_run_bytes");
    for (const Ceiling cl : {Ceiling::hbm, Ceiling::dram, Ceiling::h2d, Ceiling::d2h}) {
      const std::string key(kCeilingNames[size_t(cl)]);
      c.half_run_bytes[size_t(cl)] = g.number(key, Range{0, 1e9, false}, 0.0);
    }
    g.finish();
  } else {
    m.node("gather_half_run_bytes");
  }
  m.finish();
  c.calibrated = false;
  for (const auto& e : c.per_kind)
    for (double v : e.of) c.calibrated |= (v != 1.0);
  return c;
}

}  // namespace kvsim
