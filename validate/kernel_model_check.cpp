#include "validate/kernel_model_check.hpp"

#include "core/quantile.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <sstream>

#include "core/format.hpp"
#include "core/units.hpp"
#include "core/yaml_reader.hpp"
#include "model/library.hpp"
#include "model/roofline.hpp"

namespace kvsim::validate {

namespace {

// A GPU a point names: a library GPU, or one the file describes by its datasheet figures (GPUs outside
// kvsim's library: they price the model's form, not a plan).
struct CheckGpu {
  GpuSpec spec;
  Calibration cal;
};

std::vector<std::string> model_names() {
  std::vector<std::string> v;
  for (size_t i = 1; i < kKernelModelNames.size(); ++i) v.emplace_back(kKernelModelNames[i]);
  return v;
}

// A GPU outside the library: hbm_gbs, sms, kernel_us, h2d_gbs (datasheet figures with a source).
GpuSpec read_outside_gpu(YamlMap m, const std::string& name) {
  GpuSpec g;
  g.name = name;
  g.architecture = m.string("architecture", "");
  g.hbm_bandwidth = m.number("hbm_gbs", Range::positive(1e5)) * kGB;
  g.sm_count = int(m.integer("sms", Range::between(1, 10000)));
  g.kernel_latency = m.number("kernel_us", Range::between(0, 1e3)) * kUs;
  g.host_launch_latency = g.kernel_latency;
  g.h2d_pinned = g.d2h_pinned = m.number("h2d_gbs", Range::positive(1e4), 25.0) * kGB;
  g.fp32 = m.number("fp32_tflops", Range::positive(1e4), 50.0) * 1e12;
  g.tensor_fp16 = g.tensor_bf16 = g.fp32 * 16;
  (void)m.string("source");
  m.finish();
  return g;
}

// The calibration a point's GPU is priced with: the library GPU's default (its published curves),
// or, outside the library, the roofline's constants (the models' class curves then fall back to 1).
const CheckGpu& gpu_for(const std::string& name, std::map<std::string, CheckGpu>& gpus, const HostSpec& host) {
  auto it = gpus.find(name);
  if (it != gpus.end()) return it->second;
  CheckGpu g;
  g.spec = load_gpu_file(resolve(LibraryKind::hardware, name, "", 0, "gpu"));
  g.cal = default_calibration(g.spec, host);
  return gpus.emplace(name, std::move(g)).first->second;
}

// The phase one point's kernel call is, in the planner's vocabulary (policies/blocks.hpp's forms).
Phase point_phase(KernelModelId model, YamlMap& m, std::string& shape) {
  Phase p{"check", PhaseKind::select, Device::gpu, ComputeUnit::simt, {}};
  p.repeat = 1;
  p.work.launches = 1;
  switch (model) {
    case KernelModelId::torch_topk: {
      const double rows = m.number("rows", Range::positive(1e9)), n = m.number("n", Range::positive(1e10));
      const double k = m.number("k", Range::positive(1e10));
      p.rows = float(rows), p.row_elements = float(n);
      p.work.flops = rows * n * 4;
      p.work.hbm_bytes = rows * (n * 4 + k * 4);  // blocks::select: the scores once, the ids
      shape = fmt("%g", rows) + " rows x " + fmt("%g", n) + ", k " + fmt("%g", k);
      break;
    }
    case KernelModelId::gemv_scoring: {
      // heads x vectors of dim, each vector read once: 2 dim FLOPs per pair (blocks::score).
      const double heads = m.number("heads", Range::positive(1e9)), vectors = m.number("vectors", Range::positive(1e12));
      const double dim = m.number("dim", Range::positive(1e9)), eb = m.number("elem_bytes", Range::positive(16));
      p.kind = PhaseKind::score;
      p.work.flops = heads * vectors * 2 * dim;
      p.work.hbm_bytes = vectors * dim * eb + heads * vectors * 4 + heads * dim * eb;
      shape = fmt("%g", heads) + " x " + fmt("%g", vectors) + " x " + fmt("%g", dim);
      break;
    }
    case KernelModelId::stream_pass: {
      const double bytes = m.number("bytes", Range::positive(1e13)), run = m.number("run_bytes", Range::between(0, 1e12), 0.0);
      p.kind = PhaseKind::gather;
      p.work.hbm_bytes = 2 * bytes;  // read and write (blocks::gather)
      p.run_bytes = run;
      shape = fmt("%g", bytes) + " B" + (run > 0 ? " in runs of " + fmt("%g", run) + " B" : "");
      break;
    }
    case KernelModelId::copy_calls: {
      const double copies = m.number("copies", Range::positive(1e9)), each = m.number("bytes_per_copy", Range::positive(1e12));
      const bool h2d = m.choice("direction", {"h2d", "d2h"}, "h2d") == "h2d";
      p.kind = PhaseKind::copy;
      p.device = Device::pcie;
      p.stream = h2d ? Stream::h2d : Stream::d2h;
      (h2d ? p.work.h2d_bytes : p.work.d2h_bytes) = copies * each;
      p.work.hbm_bytes = p.work.dram_bytes = copies * each;
      p.run_bytes = copies > 1 ? each : 0;
      p.work.launches = copies;  // one cudaMemcpyAsync per copy (the model prices each declared launch as a call)
      shape = fmt("%g", copies) + " x " + fmt("%g", each) + " B " + (h2d ? "h2d" : "d2h");
      break;
    }
    default: break;
  }
  return p;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

KernelCheckReport check_kernel_models(const std::string& path) {
  set_kernel_models(true);  // the check prices points with the models on, whatever the default
  YamlMap top(load_yaml_file(path), path, "");
  (void)top.choice("schema", {"kvsim.kernel_checks/1"});
  (void)top.string("description", "");
  const HostSpec host = load_host_file(resolve(LibraryKind::host, "sapphire-rapids-2s", path, 0, "host"));
  std::map<std::string, CheckGpu> gpus;
  if (top.has("gpus")) {
    const YAML::Node g = top.node("gpus");
    if (!g.IsMap()) top.fail("gpus", "must map GPU names to their datasheet figures");
    for (const auto& kv : g) {
      const std::string name = kv.first.as<std::string>();
      CheckGpu c;
      c.spec = read_outside_gpu(YamlMap(kv.second, path, "gpus." + name), name);
      // No curves, every constant 1, but calibrated: the kernel models price its phases (their form
      // alone), as they do a library GPU's; an uncalibrated machine would be the bare roofline.
      c.cal.name = name + "-datasheet";
      c.cal.calibrated = true;
      gpus.emplace(name, std::move(c));
    }
  } else {
    top.node("gpus");
  }
  KernelCheckReport r;
  const YAML::Node list = top.node("points");
  if (!list || !list.IsSequence() || list.size() == 0) top.fail("points", "must be a non-empty list of published timings");
  for (size_t i = 0; i < list.size(); ++i) {
    YamlMap m(list[i], path, "points[" + std::to_string(i) + "]");
    KernelCheckPoint pt;
    pt.id = m.string("id");
    const std::string model = m.choice("model", model_names());
    pt.model = KernelModelId(std::find(kKernelModelNames.begin(), kKernelModelNames.end(), model) - kKernelModelNames.begin());
    pt.gpu = m.string("gpu");
    const bool gpu_stated = m.boolean("gpu_stated", true);
    const bool verified = m.boolean("verified");
    // A point that set one of the models' constants is shown but never checks the model it set.
    const bool constant = m.choice("role", {"check", "constant"}, "check") == "constant";
    pt.counted = gpu_stated && verified && !constant;
    pt.measured_s = m.number("measured_us", Range::positive(1e9)) * kUs;
    pt.source = m.string("source");
    pt.note = m.string("note", "");
    Phase ph = point_phase(pt.model, m, pt.shape);
    m.finish();
    const CheckGpu& g = gpu_for(pt.gpu, gpus, host);
    const Machine mc = make_machine(g.spec, host, DType::bf16, DType::bf16, true, g.cal, 1);
    pt.predicted_s = roofline(ph, mc).seconds;
    r.points.push_back(std::move(pt));
  }
  top.finish();
  for (size_t k = 1; k < size_t(KernelModelId::count); ++k) {
    KernelModelSummary s;
    s.model = KernelModelId(k);
    std::vector<double> errs, signed_errs;
    std::set<std::string> sources;
    for (const auto& p : r.points) {
      if (p.model != s.model) continue;
      ++s.points;
      if (!p.counted) continue;
      ++s.counted;
      errs.push_back(std::abs(p.error()));
      signed_errs.push_back(p.error());
      sources.insert(p.source);
    }
    s.sources = int(sources.size());
    s.median_abs_error = median(errs);
    std::sort(signed_errs.begin(), signed_errs.end());
    if (!signed_errs.empty()) {
      s.p10 = interpolated_quantile(signed_errs, 0.1);
      s.p90 = interpolated_quantile(signed_errs, 0.9);
    }
    if (s.points) r.models.push_back(s);
  }
  for (const auto& p : r.points)
    if ((p.error() > 1 || p.error() < -0.5) && p.note.empty()) r.unexplained.push_back(p.id);
  return r;
}

std::string kernel_check_markdown(const KernelCheckReport& r, const std::string& command) {
  std::ostringstream o;
  o << "Written by `" << command << "` from `scenarios/measurements/kernel-models.yaml`.\n\n";
  o << "| model | points | counted | sources (counted) | median abs error (counted) |\n|---|---|---|---|---|\n";
  for (const auto& s : r.models)
    o << "| " << to_string(s.model) << " | " << s.points << " | " << s.counted << " | " << s.sources << " | "
      << (s.counted ? fmt("%.1f%%", 100 * s.median_abs_error) : std::string("—")) << " |\n";
  o << "\n| id | model | GPU | shape | measured us | predicted us | error | counted | source | note |\n"
       "|---|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& p : r.points)
    o << "| " << p.id << " | " << to_string(p.model) << " | " << p.gpu << " | " << p.shape << " | "
      << fmt("%.2f", p.measured_s * 1e6) << " | " << fmt("%.2f", p.predicted_s * 1e6) << " | "
      << fmt("%+.0f%%", 100 * p.error()) << " | " << (p.counted ? "yes" : "no (weighted down)") << " | " << p.source
      << " | " << p.note << " |\n";
  if (!r.unexplained.empty()) {
    o << "\n**Off by more than 2x with no explanation:**";
    for (const auto& id : r.unexplained) o << " " << id;
    o << "\n";
  }
  return o.str();
}

std::string kernel_check_yaml(const KernelCheckReport& r, const std::string& command) {
  std::ostringstream o;
  o << "# Each kernel model's error against published kernel timings. Written by `" << command
    << "`; do not edit (docs/validation/kernel-models.md).\n";
  o << "schema: kvsim.kernel_model_checks/1\nmodels:\n";
  for (const auto& s : r.models)
    o << "  " << to_string(s.model) << ": {points: " << s.points << ", counted: " << s.counted
      << ", sources: " << s.sources << ", median_abs_error: " << fmt("%.4f", s.median_abs_error)
      << ", p10: " << fmt("%.4f", s.p10) << ", p90: " << fmt("%.4f", s.p90) << "}\n";
  return o.str();
}

}  // namespace kvsim::validate
