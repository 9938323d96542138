#include "validate/gpu_kit.hpp"

#include <cmath>
#include <cstdio>
#include <sstream>

#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "model/library.hpp"
#include "model/roofline.hpp"

namespace kvsim::validate {

const GpuSpec& match_library_gpu(const cuda::DeviceInfo& device, const std::vector<GpuSpec>& library) {
  std::vector<const GpuSpec*> hits;
  std::string all;
  for (const GpuSpec& g : library) {
    all += (all.empty() ? "" : ", ") + g.name + " (" + std::to_string(g.sm_count) + " SMs, " +
           std::to_string(int(std::lround(g.hbm_capacity_bytes / double(1 << 30)))) + " GiB)";
    const double mem = g.hbm_capacity_bytes;
    if (g.sm_count == device.sm_count && mem > 0 && std::abs(device.memory_bytes - mem) <= 0.04 * mem)
      hits.push_back(&g);
  }
  char what[160];
  std::snprintf(what, sizeof what, "'%s' (%d SMs, %.1f GiB)", device.name.c_str(), device.sm_count,
                device.memory_bytes / double(1 << 30));
  if (hits.empty())
    throw_input_error("CUDA device " + std::to_string(device.index), 0, "--hardware",
                      std::string("no GPU in the library has the SM count and memory of ") + what +
                          ": add scenarios/hardware/<name>.yaml (docs/hardware.md) and pass --hardware <name>; "
                          "the library has " + all);
  if (hits.size() > 1) {
    std::string names;
    for (const GpuSpec* g : hits) names += (names.empty() ? "" : ", ") + g->name;
    throw_input_error("CUDA device " + std::to_string(device.index), 0, "--hardware",
                      std::string("several library GPUs match ") + what + ": " + names +
                          "; pass --hardware <name> (make gpu-validate GPU=<name>)");
  }
  return *hits.front();
}

GpuSpec library_gpu_of(const cuda::DeviceInfo& device) {
  std::vector<GpuSpec> library;
  for (const std::string& n : library_names(LibraryKind::hardware))
    library.push_back(load_gpu_file(resolve(LibraryKind::hardware, n, "library", 0, "hardware")));
  return match_library_gpu(device, library);
}

Ceilings gpu_ceilings(const GpuSpec& gpu, const std::string& ran_on) {
  Ceilings ce;
  ce.device = "cuda";
  ce.name = gpu.name;
  ce.source = "GPU spec " + gpu.name + " (datasheet ceilings from the library), run on " + ran_on;
  ce.threads = 1;
  ce.unit = ComputeUnit::simt;
  ce.machine.simt = gpu.fp32;
  ce.machine.hbm = gpu.hbm_bandwidth;
  ce.machine.h2d = gpu.h2d_pinned;
  return ce;
}

Timer fake_timer(const Ceilings& ce, std::function<double(const Instance&)> efficiency, bool run_kernels) {
  return [ce, efficiency, run_kernels](const std::vector<Instance>& inst, int inner, int samples) {
    // The same ideal machine validate::run divides by, so the fitted efficiency is efficiency(instance).
    static const Calibration ideal;
    Machine m = ce.machine;
    m.calibration = &ideal;
    double slowest = 0;
    for (const Instance& in : inst) {
      if (run_kernels) in.run();
      Phase ph{"fake", PhaseKind::attention, ce.device == "cpu" ? Device::cpu : Device::gpu, ce.unit, in.work};
      ph.work.launches = 0;
      slowest = std::max(slowest, roofline(ph, m).seconds / efficiency(in));
    }
    (void)inner;
    return std::vector<double>(size_t(std::max(1, samples)), slowest);
  };
}

namespace {
std::string num(double v, int digits = 3) {
  char b[48];
  std::snprintf(b, sizeof b, "%.*g", digits, v);
  return b;
}
}  // namespace

std::string kit_report(const std::vector<Case>& cases, const Result& r, const Calibration* published,
                       const std::string& published_name) {
  std::ostringstream s;
  s << "# " << r.ceilings.name << ": our CUDA kernels measured on the GPU against the published calibration\n\n"
    << "Written by `kvsim validate --device cuda --kit` (`make gpu-validate`). Ceilings: " << r.ceilings.source
    << ".\n\nEach measured curve is written to the calibration under the model phases its kernel implements. "
       "`published` is what `"
    << (published ? published_name : std::string("(none)"))
    << "` gives the same phase for the same work, as `kvsim plan` reads it (its curve for the phase, else "
       "for the kind, at this point's x or, for a curve over bytes, at this point's bytes; else its "
       "constant): "
       "kernels others published on this GPU. `ratio` = measured / published: below 1, our kernel is slower "
       "than the published ones the default plan assumes.\n\n";
  s << "| case | model phase | kind | ceiling | x | measured efficiency | published | ratio |\n"
    << "|---|---|---|---|---|---|---|---|\n";
  for (const Case& c : cases) {
    std::vector<std::string> keys = c.model_phases;
    if (keys.empty()) keys.push_back(c.kind_wide ? std::string() : c.phase);
    for (const std::string& key : keys)
      for (const Point& p : r.points) {
        if (p.phase != c.phase || p.pass != "fit") continue;
        const std::string shown = key.empty() ? "(every " + std::string(to_string(c.kind)) + ")" : key;
        // The published efficiency of the same work, looked up as `kvsim plan` would: the phase carries
        // the point's x, and a published curve over another variable reads the point's bytes (e.g. a
        // published attention curve over bytes, for our curve over context tokens).
        Phase ph{key, c.kind, Device::gpu, ComputeUnit::simt, {}};
        if (c.x == CurveVariable::context_tokens) ph.context_tokens = p.x;
        if (c.x == CurveVariable::run_bytes) ph.run_bytes = p.x;
        if (c.x == CurveVariable::batch) ph.batch = p.x;
        const double pub = published ? published->efficiency(ph, p.ceiling, p.bytes) : 0;
        s << "| " << c.phase << " | " << shown << " | " << to_string(c.kind) << " | "
          << kCeilingNames[size_t(p.ceiling)] << " | " << kCurveVariableNames[size_t(c.x)] << " " << num(p.x, 6)
          << " | " << num(p.efficiency) << " | " << (published ? num(pub) : std::string("-")) << " | "
          << (published && pub > 0 ? num(p.efficiency / pub) : std::string("-")) << " |\n";
      }
  }
  if (!published)
    s << "\nNo published calibration exists for " << r.ceilings.name << " (scenarios/calibration/" << r.ceilings.name
      << "-published.yaml): nothing to compare against.\n";
  s << "\nHeld-out points (sizes between the fitted ones, fresh inputs) and their calibrated error are in the "
       "table `kvsim validate` prints.\n";
  return s.str();
}

Result run_kit(const std::vector<Case>& cases, const Ceilings& ce, const Timer& timer, const Options& o,
               const Calibration& uncalibrated, const Calibration* published, const std::string& published_name,
               const std::string& calibration_path, const std::string& report_path) {
  Result r = run(cases, ce, timer, o, uncalibrated);
  const std::string report = kit_report(cases, r, published, published_name);
  write_file_atomic(calibration_path, r.calibration_yaml);
  write_file_atomic(report_path, report);
  return r;
}

}  // namespace kvsim::validate
