#include "validate/kernel_time_check.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>

#include "kernels/emu/counters.hpp"
#include "validate/gpu_kit.hpp"

namespace kvsim::validate {
namespace {

std::string num(double v, int digits = 3) {
  char b[48];
  std::snprintf(b, sizeof b, "%.*g", digits, v);
  return b;
}
std::string us(double s) { return num(s * 1e6, 4); }

const char* x_label(CurveVariable x) {
  switch (x) {
    case CurveVariable::bytes: return "bytes";
    case CurveVariable::run_bytes: return "run_bytes";
    case CurveVariable::context_tokens: return "context_tokens";
    case CurveVariable::batch: return "batch";
    case CurveVariable::count: break;
  }
  return "";
}

// The measured efficiency at exactly this x (a grid point of the kit; no interpolation), or 0; *same
// says whether the curve was measured on the case's current kernels: the kit writes the case's
// `kernels` words into the curve's source, and a case whose kernels changed says so in those words.
double measured_efficiency(const Calibration& cal, const Phase& ph, Ceiling cl, double x, const std::string& kernels,
                           bool* same) {
  const EfficiencyCurve* curve = cal.curve_for(ph, cl);
  if (!curve) return 0;
  *same = curve->source.find(kernels) != std::string::npos;
  for (const auto& [px, e] : curve->points)
    if (std::abs(px - x) <= 1e-6 * std::max(1.0, std::abs(x))) return e;
  return 0;
}

}  // namespace

TimeCheck check_kernel_times(const std::vector<Case>& cases, const TimeModelGpu& g, const Calibration* measured,
                             const std::string& measured_name, const std::function<void(const std::string&)>& progress) {
  TimeCheck t;
  t.gpu = g.spec.name;
  t.measured_name = measured ? measured_name : "";
  t.model = g;
  const Ceilings ce = gpu_ceilings(g.spec, "the emulator (counts), priced by the kernel time model");
  const Calibration uncal;  // the kit's `uncal` only matters for the gather penalty (none of the GPU cases)
  FullSizeEmulation full;
  std::vector<double> errors;
  for (const Case& c : cases) {
    for (double s : c.grid) {
      TimeCheckPoint p;
      p.case_name = c.phase;
      p.kernels = c.kernels;
      p.size = s;
      p.x_name = x_label(c.x);
      const auto t0 = std::chrono::steady_clock::now();
      Instance in;
      {
        emu::CountPause setup;  // the inputs' uploads are not the kernel's
        in = c.make(s, 0, 0.0);
      }
      emu::Counts counts;
      {
        emu::CountScope scope;
        in.run();
        counts = scope.counts();
      }
      p.emulated_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      const Phase ph = case_phase(c, {in}, ce);
      const CasePoint cp = case_point(c, ph, ce, uncal);
      p.phase = std::string(ph.name);
      p.kind = std::string(to_string(c.kind));
      p.ceiling = std::string(kCeilingNames[size_t(cp.ceiling)]);
      p.kind_wide = c.kind_wide;
      p.x = cp.x;
      p.bound_seconds = cp.ideal_seconds;
      p.predicted = predict_call(counts, g);
      p.launches = counts.launches.size();
      for (const auto& l : counts.launches) {
        p.dram_bytes += l.unique_bytes();
        p.host_bytes += 32 * l.host_sectors;
        p.requested_bytes += l.sector_bytes();
        p.chain_global = std::max(p.chain_global, l.chain_global);
        p.chain_shared = std::max(p.chain_shared, l.chain_shared);
        p.barriers = std::max(p.barriers, l.barriers);
      }
      if (measured) {
        bool same = true;
        const double e = measured_efficiency(*measured, ph, cp.ceiling, cp.x, c.kernels, &same);
        if (e > 0) {
          p.measured = cp.ideal_seconds / (e * cp.penalty);
          p.error = p.predicted.seconds / p.measured - 1;
          p.earlier_kernel = !same;
        }
        if (e > 0 && !same) ++t.earlier;
        if (e > 0 && same) {
          errors.push_back(std::abs(p.error));
          ++t.compared;
          if (std::abs(p.error) <= 0.30) ++t.within_30;
          if (p.predicted.seconds <= 2 * p.measured && p.predicted.seconds >= 0.5 * p.measured) ++t.within_2x;
        }
      }
      if (progress)
        progress(c.phase + " " + num(s, 6) + ": predicted " + us(p.predicted.seconds) + " us (" + p.predicted.bound +
                 ")" + (p.measured > 0 ? ", measured " + us(p.measured) + " us" : std::string()) + "; emulated in " +
                 num(p.emulated_seconds, 3) + " s");
      t.points.push_back(std::move(p));
    }
  }
  if (!errors.empty()) {
    std::sort(errors.begin(), errors.end());
    const size_t n = errors.size();
    t.median_abs_error = n % 2 ? errors[n / 2] : 0.5 * (errors[n / 2 - 1] + errors[n / 2]);
  }
  return t;
}

std::string time_check_markdown(const TimeCheck& t) {
  std::ostringstream s;
  const Microarchitecture& a = t.model.arch;
  s << "GPU **" << t.gpu << "** (compute capability " << a.compute_capability << "): " << t.model.spec.sm_count
    << " SMs, HBM " << num(t.model.spec.hbm_bandwidth / 1e12, 3) << " TB/s, SM clock "
    << num(t.model.clock_hz / 1e6, 4) << " MHz (" << t.model.clock_source << "); L2 " << num(a.l2_cycles)
    << ", DRAM " << num(a.dram_cycles) << ", shared " << num(a.shared_cycles) << ", barrier "
    << num(a.barrier_cycles) << " cycles; kernel " << us(t.model.spec.kernel_latency) << " us, host launch "
    << us(t.model.spec.host_launch_latency) << " us, copy call " << us(t.model.t_call) << " us.\n\n";
  if (!t.measured_name.empty())
    s << "Against `" << t.measured_name << "`: " << t.compared << " measured points, " << t.within_30
      << " within 30% (" << (t.compared ? num(100.0 * t.within_30 / t.compared, 3) : "-") << "%), " << t.within_2x
      << " within 2x; median |error| " << (t.compared ? num(100 * t.median_abs_error, 3) + "%" : std::string("-")) << "."
      << (t.earlier ? " Not counted: " + std::to_string(t.earlier) +
                          " points measured on an earlier version of their case's kernels (error in brackets: "
                          "the measurement's source does not name the kernels that ran here)."
                    : std::string())
      << "\n\n";
  else
    s << "No measured calibration for this GPU: predictions only.\n\n";
  s << "| case | size | x | launches | DRAM bytes | chain (global / shared / barriers) | bound | predicted us | "
       "of bound | measured us | error |\n|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const TimeCheckPoint& p : t.points) {
    s << "| " << p.case_name << " | " << num(p.size, 6) << " | " << p.x_name << " " << num(p.x, 6) << " | "
      << p.launches << " | " << num(double(p.dram_bytes), 4) << " | " << p.chain_global << " / " << p.chain_shared
      << " / " << p.barriers << " | " << p.predicted.bound << " | " << us(p.predicted.seconds) << " | "
      << num(p.bound_seconds / p.predicted.seconds, 3) << " | " << (p.measured > 0 ? us(p.measured) : "-") << " | "
      << (p.measured <= 0        ? std::string("-")
          : p.earlier_kernel ? "[" + std::string(p.error >= 0 ? "+" : "") + num(100 * p.error, 3) + "%]"
                             : (p.error >= 0 ? "+" : "") + num(100 * p.error, 3) + "%")
      << " |\n";
  }
  return s.str();
}

std::string time_check_json(const TimeCheck& t) {
  nlohmann::json j;
  j["schema"] = "kvsim.kernel_time_check/1";
  j["gpu"] = t.gpu;
  j["measured"] = t.measured_name;
  j["command"] = t.command;
  j["clock_mhz"] = t.model.clock_hz / 1e6;
  j["compared"] = t.compared;
  j["within_30"] = t.within_30;
  j["within_2x"] = t.within_2x;
  j["median_abs_error"] = t.median_abs_error;
  j["earlier_kernel_points"] = t.earlier;
  nlohmann::json pts = nlohmann::json::array();
  for (const TimeCheckPoint& p : t.points) {
    nlohmann::json q{{"case", p.case_name},
                     {"phase", p.phase},
                     {"kind", p.kind},
                     {"ceiling", p.ceiling},
                     {"kind_wide", p.kind_wide},
                     {"size", p.size},
                     {"x_name", p.x_name},
                     {"x", p.x},
                     {"launches", p.launches},
                     {"dram_bytes", p.dram_bytes},
                     {"host_bytes", p.host_bytes},
                     {"requested_bytes", p.requested_bytes},
                     {"chain_global", p.chain_global},
                     {"chain_shared", p.chain_shared},
                     {"barriers", p.barriers},
                     {"bound", p.predicted.bound},
                     {"predicted_s", p.predicted.seconds},
                     {"device_s", p.predicted.device},
                     {"host_s", p.predicted.host},
                     {"bound_s", p.bound_seconds},
                     {"fraction_of_bound", p.bound_seconds / p.predicted.seconds},
                     {"emulated_s", p.emulated_seconds}};
    if (p.measured > 0) q["measured_s"] = p.measured, q["error"] = p.error, q["earlier_kernel"] = p.earlier_kernel;
    nlohmann::json ls = nlohmann::json::array();
    for (const LaunchTime& l : p.predicted.launches)
      ls.push_back({{"kernel", l.kernel},
                    {"blocks", l.blocks},
                    {"threads", l.threads},
                    {"shared_bytes", l.shared_bytes},
                    {"blocks_per_sm", l.blocks_per_sm},
                    {"waves", l.waves},
                    {"t_launch", l.t_launch},
                    {"t_memory", l.t_memory},
                    {"t_link", l.t_link},
                    {"t_chain", l.t_chain},
                    {"seconds", l.seconds},
                    {"bound", l.bound}});
    q["launch_times"] = ls;
    pts.push_back(q);
  }
  j["points"] = pts;
  return j.dump(1) + "\n";
}

}  // namespace kvsim::validate
