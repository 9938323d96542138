#include "model/calibration.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

namespace kvsim {

Calibration::Calibration() {
  for (auto& e : per_kind) e.of.fill(1.0);
}

std::string Calibration::constant_source(PhaseKind k, Ceiling c) const {
  const std::string& from = constants_from[size_t(c)].empty() ? name : constants_from[size_t(c)];
  const std::string ceiling(kCeilingNames[size_t(c)]);
  switch (origin[size_t(k)][size_t(c)]) {
    case ConstantOrigin::builtin: return from + " (unset: the roofline's 1.0)";
    case ConstantOrigin::efficiency_default: return from + " efficiency." + ceiling;
    case ConstantOrigin::phases_override: return from + " phases." + std::string(to_string(k)) + "." + ceiling;
    case ConstantOrigin::measured: return from + " phases." + std::string(to_string(k)) + "." + ceiling + " (measured)";
  }
  return from;
}

double EfficiencyCurve::at(double x, bool* outside) const {
  const bool below = x < points.front().first, above = x > points.back().first;
  if (outside) *outside = below || above;
  if (below || !(x > 0)) return points.front().second;
  if (above) return points.back().second;
  auto hi = std::lower_bound(points.begin(), points.end(), x,
                             [](const std::pair<double, double>& p, double v) { return p.first < v; });
  if (hi->first == x || hi == points.begin()) return hi->second;
  auto lo = hi - 1;
  const double t = std::log(x / lo->first) / std::log(hi->first / lo->first);
  const double e = lo->second + t * (hi->second - lo->second);
  // On a curve against a phase's bytes, time is bytes / e: where e climbs steeply between two points
  // (a measured curve rising 4x over an octave), the linear-in-log-x reading would make a slightly
  // larger phase faster than the point below it. Time never falls as bytes grow (the same-die
  // properties, tests/properties/test_same_die.cpp): e is held to the lower point's time there.
  if (this->x == CurveVariable::bytes) return std::min(e, lo->second * x / lo->first);
  return e;
}

void Calibration::index_curves() {
  for (auto& v : by_key_) v.clear();
  for (size_t i = 0; i < curves.size(); ++i)
    by_key_[size_t(curves[i].kind) * size_t(Ceiling::count) + size_t(curves[i].ceiling)].push_back(uint16_t(i));
  indexed_ = curves.size() <= 0xffff ? curves.size() : size_t(-1);
}

const EfficiencyCurve* Calibration::curve_for(const Phase& p, Ceiling c) const {
  const EfficiencyCurve* kind_curve = nullptr;
  auto consider = [&](const EfficiencyCurve& cv) {
    if (!cv.phase.empty() && cv.phase == p.name) return true;
    if (cv.phase.empty() && !kind_curve) kind_curve = &cv;
    return false;
  };
  if (indexed_ == curves.size()) {
    for (uint16_t i : by_key_[size_t(p.kind) * size_t(Ceiling::count) + size_t(c)])
      if (consider(curves[i])) return &curves[i];
    return kind_curve;
  }
  for (const auto& cv : curves)
    if (cv.kind == p.kind && cv.ceiling == c && consider(cv)) return &cv;
  return kind_curve;
}

double phase_bytes_on(const Phase& p, Ceiling c) {
  const Work& w = p.work;
  double b = 0;
  switch (c) {
    case Ceiling::hbm: b = w.hbm_bytes; break;
    case Ceiling::dram: b = w.dram_bytes; break;
    case Ceiling::h2d: b = w.h2d_bytes; break;
    case Ceiling::d2h: b = w.d2h_bytes; break;
    case Ceiling::link: b = w.link_bytes; break;
    default: b = w.hbm_bytes + w.dram_bytes; break;
  }
  return p.repeat > 0 ? b / p.repeat : b;
}

double Calibration::efficiency(const Phase& p, Ceiling c, double bytes_per_instance, bool* outside_out,
                               bool* from_curve) const {
  const EfficiencyCurve* cv = curve_for(p, c);
  if (from_curve) *from_curve = cv != nullptr;
  if (!cv) return efficiency(p.kind, c, p.run_bytes);
  // A phase with no gather runs (run_bytes 0) moves one contiguous block: the longest run measured
  // stands for it, which is not an extrapolation.
  if (cv->x == CurveVariable::run_bytes && !(p.run_bytes > 0)) return cv->points.back().second;
  double x = 0;
  switch (cv->x) {
    case CurveVariable::run_bytes: x = p.run_bytes; break;
    case CurveVariable::bytes: x = bytes_per_instance; break;
    case CurveVariable::context_tokens: x = p.context_tokens; break;
    case CurveVariable::batch: x = p.batch; break;
    case CurveVariable::count: break;
  }
  bool outside = false;
  const double e = cv->at(x, &outside);
  if (outside_out) *outside_out = *outside_out || outside;
  // A run_bytes curve measured the run-length cost itself; any other curve keeps the gather penalty.
  if (cv->x == CurveVariable::run_bytes) return e;
  return e * run_share(c, p.run_bytes);
}

namespace {
std::vector<std::string> names_of(auto const& arr) { return {arr.begin(), arr.end()}; }

template <class E, size_t N>
E enum_of(const std::array<std::string_view, N>& names, const std::string& s) {
  return E(std::find(names.begin(), names.end(), s) - names.begin());
}

// Reads any ceilings present in `m` into `e` (absent ones keep their current value); marks those
// present with `origin` in `o`.
void read_efficiency(YamlMap m, Efficiency& e, std::array<ConstantOrigin, size_t(Ceiling::count)>& o,
                     ConstantOrigin origin) {
  for (size_t i = 0; i < kCeilingNames.size(); ++i) {
    const std::string key(kCeilingNames[i]);
    if (m.has(key)) o[i] = origin;
    e.of[i] = m.number(key, Range{0, 1, true}, e.of[i]);
  }
  m.finish();
}

// One entry of `curves`: kind, optional phase, ceiling, x, points [[x, eff], ...], optional source.
EfficiencyCurve read_curve(YamlMap m) {
  EfficiencyCurve cv;
  cv.kind = enum_of<PhaseKind>(kPhaseKindNames, m.choice("kind", names_of(kPhaseKindNames)));
  cv.phase = m.string("phase", "");
  cv.ceiling = enum_of<Ceiling>(kCeilingNames, m.choice("ceiling", names_of(kCeilingNames)));
  cv.x = enum_of<CurveVariable>(kCurveVariableNames, m.choice("x", names_of(kCurveVariableNames)));
  cv.source = m.string("source", "");
  const YAML::Node pts = m.node("points");
  if (!pts || !pts.IsSequence() || pts.size() == 0)
    m.fail("points", "must be a non-empty list of [x, efficiency] pairs");
  for (size_t i = 0; i < pts.size(); ++i) {
    const std::string key = "points[" + std::to_string(i) + "]";
    if (!pts[i].IsSequence() || pts[i].size() != 2) m.fail(key, "must be a pair [x, efficiency]");
    const double x = m.parse_number(pts[i][0], key + ".x", Range::positive());
    const double e = m.parse_number(pts[i][1], key + ".efficiency", Range{0, 1, true});
    if (!cv.points.empty() && x <= cv.points.back().first)
      m.fail(key, "x = " + format_number(x) + " must be greater than the previous point's x = " +
                      format_number(cv.points.back().first) + " (points sorted by x, each x once)");
    cv.points.emplace_back(x, e);
  }
  m.finish();
  return cv;
}
}  // namespace

Calibration load_calibration(YamlMap m) {
  Calibration c;
  const std::string schema = m.choice("schema", {"kvsim.calibration/1"});
  (void)schema;
  c.name = m.string("name");
  c.description = m.string("description", "");
  // `kvsim validate` writes phases_measured: true over the constants it measured.
  const bool phases_measured = m.boolean("phases_measured", false);
  Efficiency defaults;
  defaults.of.fill(1.0);
  std::array<ConstantOrigin, size_t(Ceiling::count)> default_origin{};
  if (m.has("efficiency")) read_efficiency(m.map("efficiency"), defaults, default_origin, ConstantOrigin::efficiency_default);
  else m.node("efficiency");
  for (auto& e : c.per_kind) e = defaults;
  for (auto& o : c.origin) o = default_origin;
  if (m.has("phases")) {
    YamlMap phases = m.map("phases");
    for (size_t k = 0; k < kPhaseKindNames.size(); ++k) {
      const std::string key(kPhaseKindNames[k]);
      if (phases.has(key))
        read_efficiency(phases.map(key), c.per_kind[k], c.origin[k],
                        phases_measured ? ConstantOrigin::measured : ConstantOrigin::phases_override);
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
  if (m.has("host_threads")) {
    YamlMap h = m.map("host_threads");
    c.host_threads.call_s = h.number("call_us", Range{0, 1e6, false}, 0.0) * 1e-6;
    c.host_threads.region_s = h.number("region_us", Range{0, 1e6, false}, 0.0) * 1e-6;
    c.host_threads.core_dram = h.number("core_dram_gbs", Range{0, 1e5, false}, 0.0) * 1e9;
    c.host_threads.clock_hz = h.number("clock_ghz", Range{0, 10, false}, 0.0) * 1e9;
    h.finish();
  } else {
    m.node("host_threads");
  }
  if (m.has("curves")) {
    const YAML::Node list = m.node("curves");
    if (!list.IsSequence()) m.fail("curves", "must be a list of curves (kind, ceiling, x, points)");
    for (size_t i = 0; i < list.size(); ++i) {
      const std::string key = "curves[" + std::to_string(i) + "]";
      if (!list[i].IsMap()) m.fail(key, "must be a mapping with kind, ceiling, x and points");
      c.curves.push_back(read_curve(YamlMap(list[i], m.file(), m.field(key))));
      const EfficiencyCurve& cv = c.curves.back();
      for (size_t j = 0; j + 1 < c.curves.size(); ++j)
        if (c.curves[j].kind == cv.kind && c.curves[j].phase == cv.phase && c.curves[j].ceiling == cv.ceiling)
          m.fail(key, "a second curve for kind " + std::string(to_string(cv.kind)) +
                          (cv.phase.empty() ? "" : ", phase " + cv.phase) + ", ceiling " +
                          std::string(kCeilingNames[size_t(cv.ceiling)]) + " (the first is curves[" +
                          std::to_string(j) + "])");
    }
  } else {
    m.node("curves");
  }
  m.finish();
  c.calibrated = !c.curves.empty();
  for (const auto& e : c.per_kind)
    for (double v : e.of) c.calibrated |= (v != 1.0);
  c.index_curves();
  return c;
}

bool is_host_ceiling(Ceiling c) { return c == Ceiling::host_compute || c == Ceiling::dram; }

Calibration combine_calibrations(const Calibration& gpu_side, const Calibration& host_side, std::string name,
                                 std::string description) {
  Calibration c;
  c.name = std::move(name);
  c.description = std::move(description);
  c.calibrated = gpu_side.calibrated || host_side.calibrated;
  for (size_t k = 0; k < c.per_kind.size(); ++k)
    for (size_t cl = 0; cl < size_t(Ceiling::count); ++cl) {
      const Calibration& side = is_host_ceiling(Ceiling(cl)) ? host_side : gpu_side;
      c.per_kind[k].of[cl] = side.per_kind[k].of[cl];
      c.origin[k][cl] = side.origin[k][cl];
    }
  for (size_t cl = 0; cl < size_t(Ceiling::count); ++cl) {
    const Calibration& side = is_host_ceiling(Ceiling(cl)) ? host_side : gpu_side;
    c.half_run_bytes[cl] = side.half_run_bytes[cl];
    c.constants_from[cl] = side.constants_from[cl].empty() ? side.name : side.constants_from[cl];
  }
  c.host_threads = host_side.host_threads;
  for (const auto& cv : gpu_side.curves)
    if (!is_host_ceiling(cv.ceiling)) c.curves.push_back(cv);
  for (const auto& cv : host_side.curves)
    if (is_host_ceiling(cv.ceiling)) c.curves.push_back(cv);
  c.index_curves();
  return c;
}

}  // namespace kvsim
