#include "model/kernel_model.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <string_view>

#include "core/yaml_reader.hpp"
#include "model/library.hpp"
#include "model/roofline.hpp"

namespace kvsim {

namespace kc = kernel_constants;

namespace {

// PyTorch's choice of the multi-block top-k (TensorTopK.cu, should_use_multiblock, the table for
// builds whose CUB has scan-by-key: every CUDA 11.5+ build), by rows (slices) and row length.
bool torch_multiblock(double rows, double n) {
  return (rows <= 20 && n >= 20000) || (rows > 20 && rows <= 40 && n >= 10000) ||
         (rows > 40 && rows <= 80 && n >= 8000) || (rows > 80 && rows < 200 && n >= 5000) ||
         (rows >= 200 && rows < 800 && n >= 3000) || (rows >= 800 && rows <= 4000 && n >= 800) ||
         (rows > 4000 && n >= 400);
}

// One torch.topk call's structure at a shape.
struct TopkShape {
  double rows = 1, n = 1, passes = 1, phi = 1, kernels = 1;
  double latency_s = 0;  // the single-block path's dependent-load time per call (0 on the multi-block path)
};

TopkShape topk_shape(const Phase& p, const Machine& m) {
  TopkShape t;
  t.rows = std::max(1.0, double(p.rows));
  t.n = std::max(1.0, double(p.row_elements));
  const double sms = std::max(1.0, m.sms);
  if (torch_multiblock(t.rows, t.n)) {
    t.passes = kc::kMultiBlockPasses;
    t.kernels = kc::kMultiBlockLaunches + kc::kSortLaunches;
    t.phi = 1;
  } else {
    t.passes = kc::kSingleBlockPasses;
    t.kernels = 1 + kc::kSortLaunches;
    // One block per row, at most two blocks of 1024 threads resident per SM (2048 threads per SM on
    // every GPU since Volta): rows beyond that run in waves.
    const double threads = std::min(kc::kSingleBlockThreads, 32 * std::ceil(t.n / 32));
    const double per_sm = std::max(1.0, std::floor(2048 / threads));
    t.phi = std::min(1.0, t.rows / sms);
    const double waves = std::ceil(t.rows / (sms * per_sm));
    t.latency_s = waves * t.passes * std::ceil(t.n / threads) * kc::kLoadLatencyS;
  }
  return t;
}

// torch.topk calls per instance (per layer): each declared launch of a select phase is one call.
double topk_calls(const Phase& p) {
  const double inst = std::max(1.0, double(p.repeat));
  return p.work.launches / inst;
}

// The efficiency of the kernel class's measured curve at the phase's bytes: a proxy phase of the
// class's kind, so only that kind's curves (not the phase's own name) are read.
double class_efficiency(const Phase& p, PhaseKind kind, Ceiling c, const Machine& m, bool* outside, bool* found) {
  const Calibration& cal = *m.calibration;
  Phase q = p;
  q.kind = kind;
  q.name = {};
  q.run_bytes = 0;  // the run-length share is the model's own (sectors), not the calibration's estimate
  bool from_curve = false;
  const double e = cal.efficiency(q, c, phase_bytes_on(p, c), outside, &from_curve);
  if (found) *found = from_curve;
  return e;
}

double sector_share(double run_bytes) {
  if (!(run_bytes > 0)) return 1;
  return run_bytes / (kc::kSectorBytes * std::ceil(run_bytes / kc::kSectorBytes));
}

bool gpu_ceiling(Ceiling c) { return c == Ceiling::tensor || c == Ceiling::simt || c == Ceiling::hbm; }

}  // namespace

KernelModelId kernel_model_for(const Phase& p) {
  if (p.unit == ComputeUnit::host) return KernelModelId::none;
  switch (p.kind) {
    case PhaseKind::select: return p.rows > 0 && p.row_elements > 0 ? KernelModelId::torch_topk : KernelModelId::stream_pass;
    case PhaseKind::score: return KernelModelId::gemv_scoring;
    case PhaseKind::gather:
    case PhaseKind::build:
    case PhaseKind::reconstruct:
    case PhaseKind::elementwise: return KernelModelId::stream_pass;
    case PhaseKind::copy: return KernelModelId::copy_calls;
    default: return KernelModelId::none;
  }
}

namespace {
// -1: not decided yet (the environment decides at first use: on unless KVSIM_KERNEL_MODELS=0); 0 off; 1 on.
std::atomic<int> g_kernel_models{-1};
}  // namespace

void set_kernel_models(bool on) { g_kernel_models.store(on ? 1 : 0, std::memory_order_relaxed); }

bool kernel_models_on() {
  int v = g_kernel_models.load(std::memory_order_relaxed);
  if (v < 0) {
    const char* e = std::getenv("KVSIM_KERNEL_MODELS");
    v = e && std::string_view(e) == "0" ? 0 : 1;
    int expected = -1;
    g_kernel_models.compare_exchange_strong(expected, v, std::memory_order_relaxed);
    v = g_kernel_models.load(std::memory_order_relaxed);
  }
  return v == 1;
}

bool kernel_model_applies(const Phase& p, Ceiling c, const Machine& m) {
  if (!kernel_models_on()) return false;
  const Calibration* cal = m.calibration;
  if (!cal || !cal->calibrated || is_host_ceiling(c)) return false;
  if (kernel_model_for(p) == KernelModelId::none) return false;
  return !cal->curve_for(p, c) && !cal->constant_measured(p.kind, c);
}

double kernel_model_efficiency(const Phase& p, Ceiling c, const Machine& m, bool* outside, bool* class_curve) {
  bool found = false;
  double e = 1;
  switch (kernel_model_for(p)) {
    case KernelModelId::torch_topk: {
      if (!gpu_ceiling(c)) break;
      e = class_efficiency(p, PhaseKind::elementwise, Ceiling::hbm, m, outside, &found);
      const TopkShape t = topk_shape(p, m);
      // The phase declares its bytes; the kernel moves passes x rows x n x 4 per call.
      const double declared = phase_bytes_on(p, Ceiling::hbm);
      const double moved = topk_calls(p) * t.passes * t.rows * t.n * 4;
      if (declared > 0 && moved > 0) e *= std::min(1.0, declared / moved);
      e *= t.phi;
      break;
    }
    case KernelModelId::gemv_scoring: {
      if (!gpu_ceiling(c)) break;
      const Ceiling cc = c == Ceiling::tensor ? Ceiling::tensor : Ceiling::hbm;
      e = class_efficiency(p, PhaseKind::gemm, cc, m, outside, &found);
      break;
    }
    case KernelModelId::stream_pass: {
      if (!gpu_ceiling(c)) break;
      const bool tensor = c == Ceiling::tensor;
      e = class_efficiency(p, tensor ? PhaseKind::gemm : PhaseKind::elementwise, tensor ? Ceiling::tensor : Ceiling::hbm,
                           m, outside, &found);
      // A run of r bytes uses r / (32 ceil(r / 32)) of the sectors it touches; the calibration's gather
      // estimate (r / (r + half_run), what the bound printed beside a calibrated plan uses) can be the
      // lower of the two, and then it is the one: a model never prices a gather faster than that bound.
      if (c == Ceiling::hbm) e *= std::min(sector_share(p.run_bytes), m.calibration->run_share(c, p.run_bytes));
      break;
    }
    case KernelModelId::copy_calls:
      // The link rate is the hardware file's measured copy rate: its efficiency is 1 for one contiguous
      // block, the calibration's gather estimate for runs (r / (r + half_run): each short run travels in
      // its own TLPs, as the bound beside it prices them); the per-call costs are the model's fixed time.
      found = c == Ceiling::h2d || c == Ceiling::d2h;
      e = found ? m.calibration->run_share(c, p.run_bytes) : 1;
      break;
    default: break;
  }
  if (class_curve) *class_curve = found;
  return std::clamp(e, 1e-9, 1.0);
}

double kernel_model_extra_s(const Phase& p, const Machine& m) {
  const KernelModelId id = kernel_model_for(p);
  if (id != KernelModelId::torch_topk && id != KernelModelId::copy_calls) return 0;
  const double inst = std::max(1.0, double(p.repeat));
  if (id == KernelModelId::torch_topk) {
    if (!kernel_model_applies(p, Ceiling::hbm, m)) return 0;
    const TopkShape t = topk_shape(p, m);
    const double calls = topk_calls(p);
    // The streaming term at the model's efficiency, to see whether the dependent loads are longer.
    bool o = false;
    const double e = kernel_model_efficiency(p, Ceiling::hbm, m, &o, nullptr);
    const double stream = m.hbm > 0 ? phase_bytes_on(p, Ceiling::hbm) / (m.hbm * e) : 0;
    const double loads = calls * t.latency_s;
    // The declared launches already pay one kernel latency each (one per call).
    return inst * (calls * (t.kernels - 1) * m.kernel_latency + std::max(0.0, loads - stream));
  }
  const Ceiling link = p.work.h2d_bytes > 0 ? Ceiling::h2d : Ceiling::d2h;
  if (!kernel_model_applies(p, link, m)) return 0;
  // Each declared launch of a copy is one cudaMemcpyAsync call: a policy's cost declares the calls its
  // implementation issues (the seeds' code packs the runs on one side and copies them in one call per
  // layer; an engine that copies page by page declares a call per page). The run length sets only the
  // link's efficiency (the calibration's gather estimate), not the number of calls: one call per run
  // priced a token-granular SentenceKV load at millions of calls per step, which no implementation issues.
  const double calls = p.work.launches / inst;
  return inst * std::max(0.0, calls * (kc::kCopyCallS - m.kernel_latency));
}

namespace {
std::array<KernelModelCheck, size_t(KernelModelId::count)> load_checks() {
  std::array<KernelModelCheck, size_t(KernelModelId::count)> out{};
  const std::string path = library_dir() + "/measurements/kernel-model-checks.yaml";
  YAML::Node root;
  try {
    root = load_yaml_file(path);
  } catch (const std::exception&) {
    return out;  // not written yet: every model shows "not checked"
  }
  YamlMap m(root, path, "");
  (void)m.choice("schema", {"kvsim.kernel_model_checks/1"});
  YamlMap models = m.map("models");
  for (size_t k = 1; k < kKernelModelNames.size(); ++k) {
    const std::string key(kKernelModelNames[k]);
    if (!models.has(key)) continue;
    YamlMap e = models.map(key);
    KernelModelCheck& c = out[k];
    c.points = int(e.integer("points", Range::between(0, 1e6)));
    c.counted = int(e.integer("counted", Range::between(0, 1e6)));
    c.sources = int(e.integer("sources", Range::between(0, 1e6)));
    c.median_abs_error = e.number("median_abs_error", Range::between(0, 1e6));
    c.p10 = e.number("p10", Range::between(-1, 1e6), 0.0);
    c.p90 = e.number("p90", Range::between(-1, 1e6), 0.0);
    e.finish();
  }
  models.finish();
  m.finish();
  return out;
}
}  // namespace

const KernelModelCheck& kernel_model_check(KernelModelId model) {
  static const std::array<KernelModelCheck, size_t(KernelModelId::count)> checks = load_checks();
  return checks[size_t(model)];
}

}  // namespace kvsim
