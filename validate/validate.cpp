#include "validate/validate.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "core/yaml_reader.hpp"

namespace kvsim::validate {
namespace {

double quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const double pos = q * double(v.size() - 1);
  const size_t lo = size_t(std::floor(pos)), hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (pos - double(lo)) * (v[hi] - v[lo]);
}
double median(const std::vector<double>& v) { return v.empty() ? 0 : quantile(v, 0.5); }

Ceiling ceiling_of(Bound b, ComputeUnit unit) {
  switch (b) {
    case Bound::compute: return unit == ComputeUnit::host ? Ceiling::host_compute : Ceiling::simt;
    case Bound::hbm: return Ceiling::hbm;
    case Bound::dram: return Ceiling::dram;
    case Bound::h2d: return Ceiling::h2d;
    case Bound::d2h: return Ceiling::d2h;
    case Bound::interconnect: return Ceiling::link;
    case Bound::latency: break;
  }
  return unit == ComputeUnit::host ? Ceiling::dram : Ceiling::hbm;
}

double x_of(const Case& c, const Phase& ph, Ceiling cl) {
  switch (c.x) {
    case CurveVariable::run_bytes: return ph.run_bytes;
    case CurveVariable::bytes: return phase_bytes_on(ph, cl);
    case CurveVariable::context_tokens: return ph.context_tokens;
    case CurveVariable::batch: return ph.batch;
    case CurveVariable::count: break;
  }
  return 0;
}

}  // namespace

namespace {
std::atomic<int> full_size_scopes{0};
}  // namespace
FullSizeEmulation::FullSizeEmulation() { ++full_size_scopes; }
FullSizeEmulation::~FullSizeEmulation() { --full_size_scopes; }
bool FullSizeEmulation::on() { return full_size_scopes.load() > 0; }

Phase case_phase(const Case& c, const std::vector<Instance>& inst, const Ceilings& ce) {
  // The name the planner would look its curve up by: the first model phase the kernel implements.
  Phase ph{c.model_phases.empty() ? std::string_view(c.phase) : std::string_view(c.model_phases.front()), c.kind,
           ce.device == "cpu" ? Device::cpu : Device::gpu, ce.unit, {}};
  if (inst.empty()) return ph;
  ph.run_bytes = inst[0].run_bytes;
  ph.context_tokens = inst[0].context_tokens;
  ph.batch = 0;
  for (const Instance& in : inst) {
    ph.work.flops += in.work.flops;
    ph.work.dram_bytes += in.work.dram_bytes;
    ph.work.hbm_bytes += in.work.hbm_bytes;
    ph.work.h2d_bytes += in.work.h2d_bytes;
    ph.batch += in.batch;
  }
  return ph;
}

CasePoint case_point(const Case& c, const Phase& ph, const Ceilings& ce, const Calibration& uncal) {
  CasePoint p;
  const Calibration ideal;  // every efficiency 1, no gather penalty: the raw ceilings
  Machine m = ce.machine;
  m.calibration = &ideal;
  const PhaseTime r = roofline(ph, m);
  p.ceiling = ceiling_of(r.bound, ce.unit);
  p.x = x_of(c, ph, p.ceiling);
  p.ideal_seconds = r.seconds;
  // The calibrated roofline applies the gather penalty on top of any curve that is not a run_bytes curve.
  const double h = uncal.half_run_bytes[size_t(p.ceiling)];
  p.penalty = c.x != CurveVariable::run_bytes && ph.run_bytes > 0 && h > 0 ? ph.run_bytes / (ph.run_bytes + h) : 1.0;
  return p;
}

namespace {

// One size of one case being measured: its instances (one per thread), the phase the model sees (the
// instances' work summed: they run at once), the calls per sample, and the samples so far.
struct Measurement {
  double size = 0;
  std::vector<Instance> inst;
  Phase ph;
  int inner = 1;
  std::vector<double> samples;
};

// Builds the instances, warms them up (every replica once: page faults, first touch) and sizes a
// sample to about sample_seconds.
Measurement prepare(const Case& c, double size, const Ceilings& ce, const Timer& timer, const Options& o) {
  Measurement m;
  m.size = size;
  for (int t = 0; t < ce.threads; ++t) m.inst.push_back(c.make(size, t, o.quick ? 0.0 : o.cold_bytes));
  m.ph = case_phase(c, m.inst, ce);
  (void)timer(m.inst, 1, 1);
  if (!o.quick) {
    const double t1 = std::max(1e-7, timer(m.inst, 1, 1)[0]);
    m.inner = int(std::clamp(std::ceil(o.sample_seconds / t1), 1.0, 100000.0));
  }
  return m;
}

// Samples every size of a case in `rounds` round-robin rounds, each adding min_repeats / rounds samples
// and min_seconds / rounds of timed work per size, so each size's median spans the same stretch of
// time as its neighbours' (load from other processes on a shared machine drifts over seconds).
void sample_round_robin(std::vector<Measurement>& ms, const Timer& timer, const Options& o) {
  const int rounds = o.quick ? 1 : 5;
  const int per_round = o.quick ? 1 : std::max(1, (o.min_repeats + rounds - 1) / rounds);
  for (int r = 0; r < rounds; ++r)
    for (Measurement& m : ms) {
      double spent = 0;
      int n = 0;
      while (n < per_round || (spent < o.min_seconds / rounds && n < 150)) {
        const double s = timer(m.inst, m.inner, 1)[0];
        m.samples.push_back(s);
        spent += s * m.inner;
        ++n;
      }
    }
}

// The measured part of a Point.
Point measured_point(const Case& c, const Measurement& m, const char* pass) {
  Point p;
  p.phase = c.phase;
  p.kind = c.kind;
  p.pass = pass;
  p.size = m.size;
  p.measured = median(m.samples);
  p.spread = m.samples.size() > 2 ? (quantile(m.samples, 0.9) - quantile(m.samples, 0.1)) / p.measured : 0;
  p.samples = int(m.samples.size());
  p.flops = m.ph.work.flops;
  p.bytes = m.ph.work.dram_bytes + m.ph.work.hbm_bytes + m.ph.work.h2d_bytes;
  return p;
}

std::string fmt(double v, int digits = 4) {
  char b[64];
  std::snprintf(b, sizeof b, "%.*g", digits, v);
  return b;
}

// Per-kind constants: the median fitted efficiency of each (kind, ceiling) over its fit points, for
// phases of that kind that no curve names. Not for copy (the model's copies are PCIe DMA, whose DRAM
// side a CPU memcpy does not measure) and not where a kind-wide curve already applies.
std::string calibration_yaml(const std::vector<Case>& cases, const std::vector<Point>& fit, const Ceilings& ce,
                             const Options& o, const Calibration& uncal) {
  std::ostringstream y;
  y << "# Calibration measured by `" << o.command << "`\n"
    << "# on " << ce.name << " (" << ce.device << ", " << ce.threads << " instance(s) at once).\n"
    << "# Ceilings every efficiency is a fraction of: " << ce.source << "\n"
    << "# Every efficiency below is measured: the roofline time of the kernel's phase at efficiency 1 on those\n"
    << "# ceilings divided by the median of its timed runs (warm-up, cold inputs, >= " << o.min_repeats
    << " samples). Curves are per phase name (kvsim::ref kernel), interpolated in log x by the planner.\n"
    << "schema: kvsim.calibration/1\n"
    << "name: " << o.calibration_name << "\n"
    << "description: \"measured by kvsim validate --device " << ce.device << " on " << ce.name << "\"\n";
  y << "gather_half_run_bytes:   # estimates copied from the uncalibrated roofline.yaml (a measured run_bytes curve replaces them)\n";
  for (const Ceiling cl : {Ceiling::hbm, Ceiling::dram, Ceiling::h2d, Ceiling::d2h})
    y << "  " << kCeilingNames[size_t(cl)] << ": " << fmt(uncal.half_run_bytes[size_t(cl)]) << "\n";
  std::map<std::pair<PhaseKind, Ceiling>, std::vector<double>> by_kind;
  std::set<PhaseKind> kind_wide;
  for (const Case& c : cases)
    if (c.kind_wide) kind_wide.insert(c.kind);
  // Where some cases name the model phases they implement (the CUDA kit), only those make the per-kind
  // constants: a simple reference twin timed beside them says nothing about the kernel a deployment runs.
  std::set<std::string> counted;
  const bool named = std::any_of(cases.begin(), cases.end(), [](const Case& c) { return !c.model_phases.empty(); });
  for (const Case& c : cases)
    if (!named || !c.model_phases.empty()) counted.insert(c.phase);
  for (const Point& p : fit)
    if (p.kind != PhaseKind::copy && !p.above_ceiling && !kind_wide.count(p.kind) && counted.count(p.phase))
      by_kind[{p.kind, p.ceiling}].push_back(p.efficiency);
  y << "phases_measured: true   # the constants under phases: are measurements (not fallbacks; model/calibration.hpp)\n";
  y << "phases:   # measured: median fitted efficiency of the kind's kernels below, for phases no curve names\n";
  if (by_kind.empty()) y << "  {}\n";
  PhaseKind last = PhaseKind::count;
  for (const auto& [key, effs] : by_kind) {
    if (key.first != last) y << "  " << to_string(key.first) << ":\n";
    last = key.first;
    y << "    " << kCeilingNames[size_t(key.second)] << ": " << fmt(median(effs)) << "\n";
  }
  y << "curves:\n";
  for (const Case& c : cases) {
    std::vector<const Point*> pts;
    for (const Point& p : fit)
      if (p.phase == c.phase) pts.push_back(&p);
    if (pts.empty()) continue;
    std::sort(pts.begin(), pts.end(), [](const Point* a, const Point* b) { return a->x < b->x; });
    // One curve per ceiling that bound one of its points (normally one).
    std::set<Ceiling> ceilings;
    for (const Point* p : pts)
      if (!p->above_ceiling) ceilings.insert(p->ceiling);  // a curve of left-out points only is no curve
    // The names the curve is written under: the model phases the kernel implements, else its own.
    std::vector<std::string> keys = c.model_phases;
    if (keys.empty()) keys.push_back(c.kind_wide ? std::string() : c.phase);
    for (const std::string& key : keys)
      for (const Ceiling cl : ceilings) {
        y << "  - kind: " << to_string(c.kind) << "\n";
        if (!key.empty()) y << "    phase: " << key << "\n";
        y << "    ceiling: " << kCeilingNames[size_t(cl)] << "\n"
          << "    x: " << kCurveVariableNames[size_t(c.x)] << "\n"
          << "    source: \"measured: " << c.kernels << (c.model_phases.empty() ? "" : " (case " + c.phase + ")") << "; median of timed runs per point\"\n"
          << "    points: [";
        double prev_x = 0;
        bool first = true;
        for (const Point* p : pts) {
          if (p->ceiling != cl || p->above_ceiling || !(p->x > prev_x)) continue;
          y << (first ? "" : ", ") << "[" << fmt(p->x, 12) << ", " << fmt(p->efficiency) << "]";
          prev_x = p->x;
          first = false;
        }
        y << "]\n";
      }
  }
  return y.str();
}

Summary summarize(const Case& c, const std::vector<Point>& pts) {
  Summary s{c.phase, c.kind, pts.front().ceiling, c.x};
  std::vector<double> e, ec, eff;
  for (const Point& p : pts) {
    e.push_back(std::abs(p.error));
    ec.push_back(std::abs(p.error_calibrated));
    eff.push_back(p.efficiency);
  }
  s.points = int(pts.size());
  s.median_abs_error = median(e);
  s.median_abs_error_calibrated = median(ec);
  s.max_abs_error_calibrated = *std::max_element(ec.begin(), ec.end());
  s.efficiency_min = *std::min_element(eff.begin(), eff.end());
  s.efficiency_max = *std::max_element(eff.begin(), eff.end());
  return s;
}
}  // namespace

Instance cycled(double replica_bytes, double cold_bytes, uint32_t seed,
                const std::function<std::function<void()>(uint32_t)>& build, int max_copies) {
  const int copies =
      int(std::clamp(std::ceil(cold_bytes / std::max(replica_bytes, 1.0)), 1.0, double(std::max(1, max_copies))));
  auto fns = std::make_shared<std::vector<std::function<void()>>>();
  for (int c = 0; c < copies; ++c) fns->push_back(build(seed * 1000u + uint32_t(c)));
  auto next = std::make_shared<size_t>(0);
  Instance in;
  in.run = [fns, next] { (*fns)[(*next)++ % fns->size()](); };
  return in;
}

Result run(const std::vector<Case>& all, const Ceilings& ce, const Timer& timer, const Options& o,
           const Calibration& uncal) {
  Result r;
  r.ceilings = ce;
  std::vector<Case> cases;
  for (const Case& c : all)
    if (o.filter.empty() || c.phase.find(o.filter) != std::string::npos) cases.push_back(c);
  Machine m_uncal = ce.machine;
  m_uncal.calibration = &uncal;

  // Per case: the fit points over the grid and the held-out points (the grid again with fresh inputs,
  // and the sizes between), sampled together. A case's fit points go into its own named curve, so
  // checking it needs only the curves so far.
  std::vector<Point> fit, held;
  std::vector<Case> done;
  for (const Case& c : cases) {
    const std::vector<double> sizes = o.quick ? std::vector<double>{c.quick} : c.grid;
    std::vector<double> again = sizes;
    if (!o.quick)
      for (size_t i = 0; i + 1 < c.grid.size(); ++i) again.push_back(std::round(std::sqrt(c.grid[i] * c.grid[i + 1])));
    std::sort(again.begin(), again.end());
    again.erase(std::unique(again.begin(), again.end()), again.end());
    // Fit and held-out instances are separate (their own inputs, their own samples) but sampled in the
    // same round-robin rounds, so both see the same stretch of machine load.
    std::vector<Measurement> all;
    for (double s : sizes) all.push_back(prepare(c, s, ce, timer, o));
    for (double s : again) all.push_back(prepare(c, s, ce, timer, o));
    sample_round_robin(all, timer, o);
    const std::vector<Measurement> hs(std::make_move_iterator(all.begin() + long(sizes.size())),
                                      std::make_move_iterator(all.end()));
    all.resize(sizes.size());
    for (const Measurement& m : all) {
      Point p = measured_point(c, m, "fit");
      const Phase& ph = m.ph;
      p.predicted = roofline(ph, m_uncal).seconds;
      p.error = (p.predicted - p.measured) / p.measured;
      const CasePoint cp = case_point(c, ph, ce, uncal);
      p.ceiling = cp.ceiling;
      p.x = cp.x;
      // The curve's value must reproduce the measured time through the calibrated roofline (gather
      // penalty included). No clamp: a point above its ceiling is a data error (the ceiling was measured
      // low, or the timer missed work); it is reported and left out of the curve (calibration_yaml), as
      // the published path does.
      p.efficiency = cp.ideal_seconds / p.measured / cp.penalty;
      p.above_ceiling = p.efficiency > 1;
      std::fprintf(stderr, "kvsim validate: %-22s %-7s size %-9g %10.4g s (%d samples, spread %.0f%%)\n",
                   c.phase.c_str(), "fit", p.size, p.measured, p.samples, 100 * p.spread);
      if (p.above_ceiling)
        std::fprintf(stderr, "kvsim validate: %-22s efficiency %.3f is above its ceiling: left out of the curve\n",
                     c.phase.c_str(), p.efficiency);
      fit.push_back(p);
    }
    done.push_back(c);
    const Calibration so_far = load_calibration(
        YamlMap(load_yaml_string(calibration_yaml(done, fit, ce, o, uncal), "kvsim validate output"),
                "kvsim validate output", ""));
    Machine m_cal = ce.machine;
    m_cal.calibration = &so_far;
    std::vector<Point> mine;
    for (const Measurement& m : hs) {
      const bool on_grid = std::find(sizes.begin(), sizes.end(), m.size) != sizes.end();
      Point p = measured_point(c, m, on_grid ? "repeat" : "between");
      const Phase& ph = m.ph;
      p.predicted = roofline(ph, m_uncal).seconds;
      p.error = (p.predicted - p.measured) / p.measured;
      const CasePoint cp = case_point(c, ph, ce, uncal);
      p.ceiling = cp.ceiling;
      p.predicted_calibrated = roofline(ph, m_cal).seconds;
      p.error_calibrated = (p.predicted_calibrated - p.measured) / p.measured;
      p.efficiency = cp.ideal_seconds / p.measured;
      p.x = cp.x;
      std::fprintf(stderr, "kvsim validate: %-22s %-7s size %-9g %10.4g s, calibrated error %+.1f%%\n",
                   c.phase.c_str(), p.pass.c_str(), p.size, p.measured, 100 * p.error_calibrated);
      mine.push_back(p);
    }
    r.summaries.push_back(summarize(c, mine));
    held.insert(held.end(), mine.begin(), mine.end());
  }
  r.calibration_yaml = calibration_yaml(cases, fit, ce, o, uncal);
  r.calibration = load_calibration(YamlMap(load_yaml_string(r.calibration_yaml, "kvsim validate output"),
                                           "kvsim validate output", ""));
  r.points = fit;
  r.points.insert(r.points.end(), held.begin(), held.end());
  return r;
}

std::string report_table(const Result& r) {
  std::ostringstream s;
  const Machine& m = r.ceilings.machine;
  char b[512];
  s << "kvsim validate --device " << r.ceilings.device << " on " << r.ceilings.name << "\n"
    << "ceilings: " << r.ceilings.source << "\n";
  if (r.ceilings.device == "cpu")
    std::snprintf(b, sizeof b, "  dram %.1f GB/s, fp32 %.1f GFLOP/s, %d threads (one kernel instance each)\n",
                  m.dram / 1e9, m.host_compute / 1e9, r.ceilings.threads);
  else
    std::snprintf(b, sizeof b, "  hbm %.1f GB/s, fp32 (CUDA cores) %.1f GFLOP/s\n", m.hbm / 1e9, m.simt / 1e9);
  s << b << "\nper point (fit = the grid the curves were fitted on; repeat / between = measured again, held out):\n";
  std::snprintf(b, sizeof b, "%-22s %-8s %10s %12s %11s %11s %8s %7s %11s %8s %7s\n", "phase", "pass", "size", "x",
                "measured_s", "predicted_s", "error", "eff", "calib_s", "error", "spread");
  s << b;
  for (const Point& p : r.points) {
    std::snprintf(b, sizeof b, "%-22s %-8s %10g %12.5g %11.4g %11.4g %+7.1f%% %7.3f %11.4g %+7.1f%% %6.0f%%\n",
                  p.phase.c_str(), p.pass.c_str(), p.size, p.x, p.measured, p.predicted, 100 * p.error, p.efficiency,
                  p.pass == "fit" ? std::nan("") : p.predicted_calibrated,
                  p.pass == "fit" ? std::nan("") : 100 * p.error_calibrated, 100 * p.spread);
    s << b;
  }
  s << "\nper phase (held-out points; error = (predicted - measured) / measured):\n";
  std::snprintf(b, sizeof b, "%-22s %-12s %-12s %-15s %6s %15s %15s %13s %16s\n", "phase", "kind", "bound", "curve x",
                "points", "med|err| uncal", "med|err| calib", "max|err| cal", "efficiency");
  s << b;
  for (const Summary& u : r.summaries) {
    std::snprintf(b, sizeof b, "%-22s %-12s %-12s %-15s %6d %14.1f%% %14.1f%% %12.1f%% %7.3f..%-7.3f\n",
                  u.phase.c_str(), std::string(to_string(u.kind)).c_str(),
                  std::string(kCeilingNames[size_t(u.ceiling)]).c_str(),
                  std::string(kCurveVariableNames[size_t(u.x)]).c_str(), u.points, 100 * u.median_abs_error,
                  100 * u.median_abs_error_calibrated, 100 * u.max_abs_error_calibrated, u.efficiency_min,
                  u.efficiency_max);
    s << b;
  }
  return s.str();
}

std::string report_csv(const Result& r) {
  std::ostringstream s;
  s << "phase,kind,pass,size,x,ceiling,flops,bytes,measured_s,samples,spread,predicted_s,error,efficiency,"
       "predicted_calibrated_s,error_calibrated\n";
  for (const Point& p : r.points)
    s << p.phase << "," << to_string(p.kind) << "," << p.pass << "," << fmt(p.size, 10) << "," << fmt(p.x, 10) << ","
      << kCeilingNames[size_t(p.ceiling)] << "," << fmt(p.flops, 10) << "," << fmt(p.bytes, 10) << ","
      << fmt(p.measured, 6) << "," << p.samples << "," << fmt(p.spread, 4) << "," << fmt(p.predicted, 6) << ","
      << fmt(p.error, 4) << "," << fmt(p.efficiency, 4) << ","
      << (p.pass == "fit" ? "" : fmt(p.predicted_calibrated, 6)) << ","
      << (p.pass == "fit" ? "" : fmt(p.error_calibrated, 4)) << "\n";
  return s.str();
}

std::string report_json(const Result& r) {
  nlohmann::json j;
  const Machine& m = r.ceilings.machine;
  j["device"] = r.ceilings.device;
  j["name"] = r.ceilings.name;
  j["ceilings"] = {{"source", r.ceilings.source}, {"threads", r.ceilings.threads},
                   {"dram_bytes_per_s", m.dram},  {"host_fp32_flops", m.host_compute},
                   {"hbm_bytes_per_s", m.hbm},    {"simt_fp32_flops", m.simt}};
  for (const Point& p : r.points) {
    nlohmann::json q = {{"phase", p.phase},         {"kind", std::string(to_string(p.kind))},
                        {"pass", p.pass},           {"size", p.size},
                        {"x", p.x},                 {"ceiling", std::string(kCeilingNames[size_t(p.ceiling)])},
                        {"flops", p.flops},         {"bytes", p.bytes},
                        {"measured_s", p.measured}, {"samples", p.samples},
                        {"spread", p.spread},       {"predicted_s", p.predicted},
                        {"error", p.error},         {"efficiency", p.efficiency}};
    if (p.pass != "fit") q["predicted_calibrated_s"] = p.predicted_calibrated, q["error_calibrated"] = p.error_calibrated;
    j["points"].push_back(q);
  }
  for (const Summary& u : r.summaries)
    j["phases"].push_back({{"phase", u.phase},
                           {"kind", std::string(to_string(u.kind))},
                           {"ceiling", std::string(kCeilingNames[size_t(u.ceiling)])},
                           {"x", std::string(kCurveVariableNames[size_t(u.x)])},
                           {"points", u.points},
                           {"median_abs_error", u.median_abs_error},
                           {"median_abs_error_calibrated", u.median_abs_error_calibrated},
                           {"max_abs_error_calibrated", u.max_abs_error_calibrated},
                           {"efficiency_min", u.efficiency_min},
                           {"efficiency_max", u.efficiency_max}});
  return j.dump(2) + "\n";
}

}  // namespace kvsim::validate
