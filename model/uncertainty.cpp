#include "model/uncertainty.hpp"

#include <array>
#include <cmath>

#include "core/yaml_reader.hpp"
#include "model/kernel_model.hpp"
#include "model/library.hpp"
#include "model/roofline.hpp"

namespace kvsim {

const char* to_string(Evidence e) {
  switch (e) {
    case Evidence::curve: return "curve";
    case Evidence::kernel_model: return "kernel_model";
    case Evidence::host_law: return "host_law";
    case Evidence::none: return "none";
  }
  return "?";
}

namespace {

CurveErrors load_curve_errors() {
  CurveErrors c;
  const std::string path = library_dir() + "/measurements/published-curve-errors.yaml";
  YAML::Node root;
  try {
    root = load_yaml_file(path);
  } catch (const std::exception&) {
    return c;  // not written: curves count as no evidence
  }
  YamlMap m(root, path, "");
  (void)m.choice("schema", {"kvsim.curve_errors/1"});
  YamlMap h = m.map("heldout");
  c.points = int(h.integer("points", Range::between(0, 1e6)));
  c.p10 = h.number("p10", Range::between(-1, 1e6));
  c.p50 = h.number("p50", Range::between(-1, 1e6));
  c.p90 = h.number("p90", Range::between(-1, 1e6));
  h.finish();
  m.finish();
  return c;
}

// [lo, hi] factors from signed errors e = predicted / measured - 1: measured = predicted / (1 + e).
PhaseSpread from_errors(Evidence ev, int group, double p10, double p90) {
  PhaseSpread s;
  s.evidence = ev;
  s.group = group;
  s.lo = 1 / (1 + std::max(p90, -0.99));
  s.hi = 1 / (1 + std::max(p10, -0.99));
  if (s.lo > 1) s.lo = 1;  // every point under-predicted: the range still holds the estimate
  if (s.hi < 1) s.hi = 1;
  return s;
}

// Groups: 0 no evidence, 1 the host law, 2..: one per kernel model, then one per (kind, ceiling) curve.
constexpr int kGroupNone = 0, kGroupHostLaw = 1, kGroupModels = 2;
constexpr int kGroupCurves = kGroupModels + int(KernelModelId::count);

// The factors each kind of evidence gives, read once: every plan's every phase asks.
struct Factors {
  PhaseSpread curve;  // group to be set per (kind, ceiling)
  bool curve_known = false;
  std::array<PhaseSpread, size_t(KernelModelId::count)> model{};
  std::array<bool, size_t(KernelModelId::count)> model_known{};
};
const Factors& factors();

}  // namespace

const CurveErrors& published_curve_errors() {
  static const CurveErrors c = load_curve_errors();
  return c;
}

namespace {
const Factors& factors() {
  static const Factors f = [] {
    Factors x;
    const CurveErrors& c = published_curve_errors();
    x.curve_known = c.points > 0;
    if (x.curve_known) x.curve = from_errors(Evidence::curve, kGroupCurves, c.p10, c.p90);
    for (size_t k = 1; k < size_t(KernelModelId::count); ++k) {
      const KernelModelCheck& m = kernel_model_check(KernelModelId(k));
      x.model_known[k] = m.counted > 0;
      if (x.model_known[k]) x.model[k] = from_errors(Evidence::kernel_model, kGroupModels + int(k), m.p10, m.p90);
    }
    return x;
  }();
  return f;
}
}  // namespace

PhaseSpread phase_spread(const PhaseResult& r, const Machine& m) {
  const Phase& p = r.phase;
  // A framework host phase: the thread law's spread on its rate.
  if (p.unit == ComputeUnit::host && m.host_ops && m.host_ops->profile && m.host_ops->profile->find(p.name)) {
    const ThreadScaling& law = m.host_ops->profile->scaling;
    const double n0 = m.host_ops->profile->threads, cores = m.host_cores;
    PhaseSpread s;
    s.evidence = Evidence::host_law;
    s.group = kGroupHostLaw;
    const double g = law.gain(cores, n0);
    s.lo = std::min(1.0, g / (cores / n0));                      // linear in cores: the fast end
    s.hi = law.has_slow ? std::max(1.0, g / law.slow_gain(cores, n0)) : 1.0;
    return s;
  }
  const Factors& f = factors();
  if (r.kernel != KernelModelId::none) {
    if (f.model_known[size_t(r.kernel)]) return f.model[size_t(r.kernel)];
  } else if (r.curve && f.curve_known) {
    PhaseSpread s = f.curve;
    s.group = kGroupCurves + int(p.kind) * int(Ceiling::count) + (r.ceiling == Ceiling::count ? 0 : int(r.ceiling));
    return s;
  }
  PhaseSpread s;
  s.evidence = Evidence::none;
  s.group = kGroupNone;
  s.lo = 1;
  s.hi = m.calibration && m.calibration->calibrated ? kNoEvidenceHigh : 1;  // the bare roofline is the bound itself
  return s;
}

TimeRange time_range(const std::vector<PhaseResult>& phases, double seconds, const Machine& m) {
  // The groups a step touches are few (a curve or two, a model or two): a short list searched in place
  // instead of an array over every possible group.
  constexpr size_t kMax = 24;
  std::array<int, kMax> group;
  std::array<double, kMax> down, up;
  size_t groups = 0;
  std::array<double, 4> t_share{};
  double serial = 0, d2 = 0, u2 = 0;
  for (const PhaseResult& r : phases) {
    if (!(r.seconds > 0)) continue;
    serial += r.seconds;
    const PhaseSpread s = phase_spread(r, m);
    t_share[size_t(s.evidence)] += r.seconds;
    size_t g = 0;
    while (g < groups && group[g] != s.group) ++g;
    if (g == groups) {
      if (groups == kMax) {  // more evidence than a step has ever had: fold into the last (wider, not narrower)
        g = kMax - 1;
      } else {
        group[g] = s.group, down[g] = up[g] = 0, ++groups;
      }
    }
    down[g] += r.seconds * (1 - s.lo);
    up[g] += r.seconds * (s.hi - 1);
  }
  TimeRange t{seconds, seconds, {}};
  if (!(serial > 0)) return t;
  for (size_t e = 0; e < t.share.size(); ++e) t.share[e] = t_share[e] / serial;
  for (size_t g = 0; g < groups; ++g) d2 += down[g] * down[g], u2 += up[g] * up[g];
  const double scale = seconds / serial;  // the phases' shares of the total
  t.lo = std::max(0.0, seconds - scale * std::sqrt(d2));
  t.hi = seconds + scale * std::sqrt(u2);
  return t;
}

}  // namespace kvsim
