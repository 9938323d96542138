#include "validate/published.hpp"

#include "core/quantile.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <set>
#include <sstream>
#include <tuple>

#include "core/dtype.hpp"
#include "core/error.hpp"
#include "core/format.hpp"
#include "core/yaml_reader.hpp"

namespace kvsim::validate {

namespace {

const std::vector<std::string> kFamilies = {"decode_attention", "sparse_attention", "h2d_copy", "d2h_copy",
                                            "scattered_copy",   "gather",           "gemv",     "gemm",
                                            "topk",             "prefill_attention", "rmsnorm",
                                            "launch"};

double dtype_bytes(const std::string& t) {
  if (t == "fp32") return 4;
  if (t == "fp8") return 1;
  return 2;  // fp16, bf16 (and the default)
}

// The curve a family's points belong to.
struct CurveKey {
  PhaseKind kind;
  Ceiling ceiling;
  CurveVariable x;
  std::string name() const {
    return std::string(to_string(kind)) + "/" + std::string(kCeilingNames[size_t(ceiling)]);
  }
  bool operator<(const CurveKey& o) const {
    return std::tie(kind, ceiling) < std::tie(o.kind, o.ceiling);
  }
};

// The FLOPs of a matrix product and the bytes it moves: the n x k weights, the m x k input and the
// m x n output (gemv: m = 1).
double matmul_flops(const PublishedPoint& p) { return 2 * std::max(1.0, p.m) * p.n * p.k; }
double matmul_bytes(const PublishedPoint& p) {
  const double m = p.m > 0 ? p.m : 1;
  return (p.n * p.k + m * (p.n + p.k)) * dtype_bytes(p.dtype);
}

// The FLOPs of a prefill (forward) attention as model/transformer.cpp's prefill_attention phase counts
// them: q.k and p.v over every score of every query head, 4 d FLOPs, plus ~5 for the softmax; causal,
// query i sees i keys (s (s + 1) / 2 scores per head), else all s. FlashAttention's benchmarks count
// 4 s^2 d per head (halved when causal), so the same time is 1 + 5/(4d) + 1/s more FLOPs here.
double prefill_attention_flops(const PublishedPoint& p) {
  const double s = p.context_tokens;
  const double scores = p.causal ? s * (s + 1) / 2 : s * s;
  return p.batch * p.q_heads * scores * (4 * p.head_dim + 5);
}

// The FLOPs of a compute-bound point, as the model counts them for its phase.
double work_flops(const PublishedPoint& p) {
  return p.family == "prefill_attention" ? prefill_attention_flops(p) : matmul_flops(p);
}

// A gemm point measures the HBM ceiling when its arithmetic intensity is below the GPU's ridge
// (tensor peak / HBM bandwidth: a skinny decode GEMM of a few tokens streams its weights), and the
// tensor ceiling above it (a prefill-size GEMM). Without the GPU's datasheet the ridge is unknown.
bool gemm_is_bandwidth_bound(const PublishedPoint& p, const GpuSpec& g) {
  DType t = DType::fp16;
  parse_dtype(p.dtype, t);
  const double peak = g.tensor_peak(t) > 0 ? g.tensor_peak(t) : g.tensor_fp16;
  return matmul_flops(p) / matmul_bytes(p) < peak / g.hbm_bandwidth;
}

bool curve_of(const PublishedPoint& p, const GpuSpec* gpu, CurveKey& key) {
  const std::string& f = p.family;
  if (f == "decode_attention" || f == "sparse_attention") key = {PhaseKind::attention, Ceiling::hbm, CurveVariable::bytes};
  else if (f == "h2d_copy") key = {PhaseKind::copy, Ceiling::h2d, CurveVariable::run_bytes};
  else if (f == "d2h_copy") key = {PhaseKind::copy, Ceiling::d2h, CurveVariable::run_bytes};
  else if (f == "scattered_copy")
    key = {PhaseKind::copy, p.direction == "d2h" ? Ceiling::d2h : Ceiling::h2d, CurveVariable::run_bytes};
  else if (f == "gather") key = {PhaseKind::gather, Ceiling::hbm, CurveVariable::run_bytes};
  else if (f == "gemv") key = {PhaseKind::gemm, Ceiling::hbm, CurveVariable::bytes};
  else if (f == "topk") key = {PhaseKind::select, Ceiling::hbm, CurveVariable::bytes};
  // Against the sequence length: the planner sets a prefill phase's context_tokens to the prompt.
  else if (f == "prefill_attention") key = {PhaseKind::prefill_attention, Ceiling::tensor, CurveVariable::context_tokens};
  else if (f == "rmsnorm") key = {PhaseKind::elementwise, Ceiling::hbm, CurveVariable::bytes};
  else if (f == "gemm" && gpu)
    key = {PhaseKind::gemm, gemm_is_bandwidth_bound(p, *gpu) ? Ceiling::hbm : Ceiling::tensor, CurveVariable::bytes};
  else return false;  // launch; a gemm on a GPU outside the library (its ridge is unknown)
  return true;
}

// Bytes the work moves on its ceiling and its x.
bool work_of(const PublishedPoint& p, double& bytes, double& x, std::string& why) {
  const double b = dtype_bytes(p.dtype);
  const std::string& f = p.family;
  if (f == "decode_attention" || f == "sparse_attention") {
    if (p.context_tokens <= 0 || (p.kv_bytes_per_token <= 0 && (p.kv_heads <= 0 || p.head_dim <= 0))) {
      why = "needs context_tokens and kv_heads, head_dim (or kv_bytes_per_token)";
      return false;
    }
    if (p.attention == "mla") {
      // One latent row per token and KV head holds K and V (V is its first head_dim_v elements); the
      // query comes in head_dim wide and the output leaves head_dim_v wide. FlashMLA's test and
      // FlashInfer's MLA nvbench count the same bytes: 0.215 ms at b128, 4096 tokens, 16 heads is
      // their 2826 GB/s, and 37.999 us at b16, 1024 tokens, 8 heads their 504.064 GB/s.
      const double row = p.kv_bytes_per_token > 0 ? p.kv_bytes_per_token : p.kv_heads * p.head_dim * b;
      bytes = p.batch * p.context_tokens * row + p.batch * p.q_heads * (p.head_dim + p.head_dim_v) * b;
    } else {
      const double row = p.kv_bytes_per_token > 0 ? p.kv_bytes_per_token : 2 * p.kv_heads * p.head_dim * b;
      bytes = p.batch * p.context_tokens * row + 2 * p.batch * p.q_heads * p.head_dim * b;
    }
    x = bytes;
  } else if (f == "h2d_copy" || f == "d2h_copy") {
    if (p.bytes <= 0) { why = "needs bytes"; return false; }
    bytes = p.bytes;
    x = p.bytes;  // one contiguous run
  } else if (f == "scattered_copy") {
    if (p.bytes <= 0 || p.run_bytes <= 0) { why = "needs bytes and run_bytes"; return false; }
    bytes = p.bytes;
    x = p.run_bytes;
  } else if (f == "gather") {
    // Rows gathered by index inside HBM into a contiguous buffer: each row read once and written once,
    // as policies/blocks.hpp's gather phase counts it.
    if (p.bytes <= 0 || p.run_bytes <= 0) { why = "needs bytes and run_bytes"; return false; }
    bytes = 2 * p.bytes;
    x = p.run_bytes;
  } else if (f == "gemv" || f == "gemm") {
    if (p.n <= 0 || p.k <= 0 || (f == "gemm" && p.m <= 0)) { why = f == "gemm" ? "needs m, n and k" : "needs n and k"; return false; }
    bytes = matmul_bytes(p);
    x = bytes;
  } else if (f == "topk") {
    // As policies/blocks.hpp's select phase counts it, so that a curve fitted here gives back the
    // measured time on that phase: each row's fp32 scores read once and its k indices written
    // (docs/validation/phase-bytes.md, rule 1).
    if (p.n <= 0) { why = "needs n"; return false; }
    bytes = p.rows * (p.n * 4 + std::max(0.0, p.k) * 4);
    x = bytes;
  } else if (f == "prefill_attention") {
    // One forward attention over whole sequences (q, k, v of s tokens each). Only what the model's
    // prefill_attention phase is makes its curve: causal, at a 16-bit activation dtype (its FLOPs run
    // at the tensor_act peak). Other rows of a table are kept in the data and listed as not fitted.
    if (p.context_tokens <= 0 || p.q_heads <= 0 || p.head_dim <= 0) { why = "needs context_tokens, q_heads and head_dim"; return false; }
    if (!p.causal) { why = "not causal: the model's prefill attention is causal (model/transformer.cpp); recorded, not fitted"; return false; }
    if (p.dtype != "fp16" && p.dtype != "bf16") { why = p.dtype + ": the model's prefill attention runs at the 16-bit activation peak; recorded, not fitted"; return false; }
    const double kv = p.kv_heads > 0 ? p.kv_heads : p.q_heads;
    bytes = p.batch * p.context_tokens * (2 * p.q_heads + 2 * kv) * p.head_dim * b;  // q in, o out, k and v read
    x = p.context_tokens;
  } else if (f == "rmsnorm") {
    // One RMSNorm over `rows` rows of `hidden`: x read and y written (with `residual`, the fused add
    // reads x and the residual and writes both), as model/transformer.cpp's norm phases count one norm
    // (the weight's `hidden` elements, which they leave out, too). Only a single fused kernel is what
    // those phases are (one launch per norm); an eager module of several kernels is not fitted.
    if (p.rows <= 0 || p.hidden <= 0) { why = "needs rows and hidden"; return false; }
    if (!p.one_kernel) { why = "several kernels (an unfused eager module): the model's norm is one fused kernel per norm; recorded, not fitted"; return false; }
    bytes = p.rows * p.hidden * b * (p.residual ? 4 : 2);
    x = bytes;
  } else {
    why = "no curve for family " + f;
    return false;
  }
  return true;
}

double ceiling_rate(const GpuSpec& g, Ceiling c) {
  switch (c) {
    case Ceiling::hbm: return g.hbm_bandwidth;
    case Ceiling::h2d: return g.h2d_pinned;
    case Ceiling::d2h: return g.d2h_pinned;
    default: return 0;
  }
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Weighted least squares in log e of e(x) = e_max x / (x + x_half): for each x_half on a log grid,
// log e_max is the weighted mean residual; the best pair wins. Fewer than two distinct x: a constant
// (the weighted geometric mean).
void fit_curve(const std::vector<CurvePoint>& pts, double& e_max, double& x_half) {
  std::set<double> xs;
  double wsum = 0, mean_log = 0;
  for (const auto& p : pts) xs.insert(p.x), wsum += p.weight, mean_log += p.weight * std::log(p.efficiency);
  mean_log /= wsum;
  e_max = std::min(1.0, std::exp(mean_log));
  x_half = 0;
  if (xs.size() < 2) return;
  double best = 0;
  for (const auto& p : pts) best += p.weight * std::pow(std::log(p.efficiency) - mean_log, 2);  // the constant's residual
  const double lo = *xs.begin() / 1000, hi = *xs.rbegin() * 1000;
  for (int i = 0; i <= 400; ++i) {
    const double xh = lo * std::pow(hi / lo, i / 400.0);
    double s = 0;
    for (const auto& p : pts) s += p.weight * (std::log(p.efficiency) - std::log(p.x / (p.x + xh)));
    const double le = std::min(0.0, s / wsum);  // e_max <= 1
    double r = 0;
    for (const auto& p : pts) r += p.weight * std::pow(std::log(p.efficiency) - le - std::log(p.x / (p.x + xh)), 2);
    if (r < best - 1e-12) best = r, e_max = std::exp(le), x_half = xh;
  }
}

double time_error(double e_fit, double e_measured) { return std::fabs(e_measured / e_fit - 1); }

// Whether points make a curve: at least kMinCurvePoints at two or more x.
bool makes_a_curve(const std::vector<CurvePoint>& pts) {
  std::set<double> xs;
  for (const auto& p : pts) xs.insert(p.x);
  return int(pts.size()) >= kMinCurvePoints && xs.size() >= 2;
}

// Fit and held-out errors over the judged points: the verified ones when they make a curve on their
// own (an unverified reading neither shapes nor judges such a curve), else every point. Held out:
// every third interior judged point (in x order), predicted by a fit of all the other points.
void judge(CurveFit& f) {
  std::vector<CurvePoint> verified;
  for (const auto& p : f.points)
    if (p.weight >= 1) verified.push_back(p);
  f.unverified_points = int(f.points.size() - verified.size());
  f.rests_on_unverified = f.unverified_points > 0 && !makes_a_curve(verified);
  const std::vector<CurvePoint>& judged = f.rests_on_unverified ? f.points : verified;
  std::vector<double> errs;
  for (const auto& p : judged) errs.push_back(time_error(f.at(p.x), p.efficiency));
  f.fit_error = median(errs);
  if (judged.size() < 4) return;
  std::set<std::string> held_ids;
  for (size_t i = 1; i + 1 < judged.size(); ++i)
    if (i % 3 == 1) held_ids.insert(judged[i].id);
  std::vector<CurvePoint> fit, held;
  for (const auto& p : f.points) (held_ids.count(p.id) ? held : fit).push_back(p);
  double em = 1, xh = 0;
  fit_curve(fit, em, xh);
  std::vector<double> he;
  for (const auto& p : held) {
    const double e_fit = xh > 0 ? em * p.x / (p.x + xh) : em;
    he.push_back(time_error(e_fit, p.efficiency));
    f.heldout_signed.push_back(p.efficiency / e_fit - 1);  // predicted time / measured time - 1
  }
  f.heldout_error = median(he);
  f.heldout_points = int(held.size());
}

CurveFit fit_points(const std::string& gpu, const std::string& family, const CurveKey& key,
                    std::vector<CurvePoint> pts) {
  std::sort(pts.begin(), pts.end(), [](const CurvePoint& a, const CurvePoint& b) { return a.x < b.x; });
  CurveFit f;
  f.gpu = gpu;
  f.family = family;
  f.kind = key.kind;
  f.ceiling = key.ceiling;
  f.x = key.x;
  f.points = pts;
  fit_curve(pts, f.e_max, f.x_half);
  for (auto& p : pts) p.weight = 1;
  fit_curve(pts, f.e_max_all_full, f.x_half_all_full);
  judge(f);
  std::set<double> xs;
  for (const auto& p : f.points) xs.insert(p.x);
  if (!makes_a_curve(f.points))
    f.why_unused = std::to_string(f.points.size()) + " point(s) at " + std::to_string(xs.size()) + " x value(s): too few for a curve";
  else if (f.fit_error > kMaxFitError)
    f.why_unused = "fit error " + fmt("%.0f", 100 * f.fit_error) + "% > " + fmt("%.0f", 100 * kMaxFitError) +
                   "%: the points disagree (mixed kernels or conditions)";
  f.usable = f.why_unused.empty();
  return f;
}

std::string curve_key_name(const CurveFit& f) {
  return std::string(to_string(f.kind)) + "/" + std::string(kCeilingNames[size_t(f.ceiling)]);
}

// The efficiency of a point on its curve: the published fraction, or the achieved rate over the GPU's
// ceiling. False (with why) when it cannot be known; `rates` describes the division for a report.
bool efficiency_of(const PublishedPoint& p, const GpuSpec* g, const CurveKey& key, double bytes, double& e,
                   std::string& why, std::string& rates) {
  if (p.fraction_of_peak > 0) {
    e = p.fraction_of_peak;  // as the source published it, against its own statement of the peak
    rates = "published as " + fmt("%.3g", e) + " of the peak";
    return true;
  }
  if (!g) {
    why = p.gpu + " is not in scenarios/hardware/, so its ceiling (and the efficiency) is unknown";
    return false;
  }
  const std::string hw = "scenarios/hardware/" + g->name + ".yaml ";
  if (key.ceiling == Ceiling::tensor) {
    // A bandwidth figure for a compute-bound GEMM converts through its own bytes.
    const double t = p.time_s > 0 ? p.time_s : bytes * p.calls / p.bandwidth_bytes_s;
    DType dt = DType::fp16;
    parse_dtype(p.dtype, dt);
    const double peak = g->tensor_peak(dt) > 0 ? g->tensor_peak(dt) : g->tensor_fp16;
    e = work_flops(p) * p.calls / t / peak;
    rates = fmt("%.1f", e * peak / 1e12) + " TFLOP/s over " + hw + "tensor_" + p.dtype + "_tflops " + fmt("%.1f", peak / 1e12);
  } else {
    const double rate = p.bandwidth_bytes_s > 0 ? p.bandwidth_bytes_s : bytes * p.calls / p.time_s;
    const double ceiling = ceiling_rate(*g, key.ceiling);
    e = rate / ceiling;
    const char* field = key.ceiling == Ceiling::hbm ? "memory.bandwidth_gbs" : key.ceiling == Ceiling::h2d ? "pcie.h2d_pinned_gbs" : "pcie.d2h_pinned_gbs";
    rates = fmt("%.2f", rate / 1e9) + " GB/s over " + hw + field + " " + fmt("%.2f", ceiling / 1e9);
  }
  return true;
}

// The donor of a curve for GPUs without their own: the fit resting on verified points first, then the
// one with the most verified points, then the most points.
bool better_donor(const CurveFit& a, const CurveFit* b) {
  if (!b) return true;
  const auto rank = [](const CurveFit& f) {
    return std::make_tuple(!f.rests_on_unverified, int(f.points.size()) - f.unverified_points, int(f.points.size()));
  };
  return rank(a) > rank(*b);
}

}  // namespace

std::vector<double> CurveFit::reference_x() const {
  if (points.empty()) return {};
  const double lo = points.front().x, hi = points.back().x;
  return {lo, std::sqrt(lo * hi), hi};
}

bool PublishedPoint::unverified() const {
  size_t i = verified.find_first_not_of(" \t");
  if (i == std::string::npos || verified.size() < i + 2) return false;
  const bool no = std::tolower(static_cast<unsigned char>(verified[i])) == 'n' &&
                  std::tolower(static_cast<unsigned char>(verified[i + 1])) == 'o';
  return no && (verified.size() == i + 2 || !std::isalpha(static_cast<unsigned char>(verified[i + 2])));
}

std::vector<PublishedPoint> load_published(const std::string& path) {
  YamlMap top(load_yaml_file(path), path, "");
  top.choice("schema", {"kvsim.measurements/1"});
  const YAML::Node list = top.node("measurements");
  if (!list || !list.IsSequence() || list.size() == 0) top.fail("measurements", "expected a non-empty list of points");
  std::vector<PublishedPoint> out;
  std::set<std::string> ids;
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string key = "measurements[" + std::to_string(i) + "]";
    if (!list[i].IsMap()) top.fail(key, "expected a mapping (id, gpu, family, config, measured, source, verified)");
    YamlMap m(list[i], path, key);
    PublishedPoint p;
    p.line = m.line();
    p.id = m.string("id");
    if (!ids.insert(p.id).second) m.fail("id", "'" + p.id + "' appears twice; ids are unique");
    p.gpu = m.string("gpu");
    p.architecture = m.string("architecture", "");
    p.family = m.choice("family", kFamilies);
    p.read_off_chart = m.boolean("read_off_chart", false);
    p.source = m.string("source");
    p.verified = m.string("verified");
    p.note = m.string("note", "");
    YamlMap c = m.map("config");
    const Range any = Range::positive(1e18);
    p.batch = c.number("batch", any, 1.0);
    p.context_tokens = c.number("context_tokens", any, 0.0);
    p.q_heads = c.number("q_heads", any, 0.0);
    p.kv_heads = c.number("kv_heads", any, 0.0);
    p.head_dim = c.number("head_dim", any, 0.0);
    p.page_size = c.number("page_size", any, 0.0);
    p.attention = c.choice("attention", {"mha", "mla"}, "mha");
    p.head_dim_v = c.number("head_dim_v", any, 0.0);
    if (p.attention == "mla" && (p.head_dim_v <= 0 || p.head_dim_v > p.head_dim))
      c.fail("head_dim_v", "attention mla needs the value width dv inside the head_dim-wide latent (FlashMLA: d 576, dv 512); allowed: 0 < head_dim_v <= head_dim (" + fmt("%g", p.head_dim) + ")");
    if (p.attention != "mla" && p.head_dim_v > 0)
      c.fail("head_dim_v", "is the MLA value width; allowed only with attention: mla");
    p.kv_bytes_per_token = c.number("kv_bytes_per_token", any, 0.0);
    p.bytes = c.number("bytes", any, 0.0);
    p.calls = c.number("calls", any, 1.0);
    p.run_bytes = c.number("run_bytes", any, 0.0);
    p.m = c.number("m", any, 0.0);
    p.n = c.number("n", any, 0.0);
    p.k = c.number("k", any, 0.0);
    p.rows = c.number("rows", any, 1.0);
    p.pinned = c.boolean("pinned", true);
    p.graph = c.boolean("graph", false);
    p.dtype = c.choice("dtype", {"fp32", "fp16", "bf16", "fp8"}, "fp16");
    p.kernel = c.string("kernel", "");
    p.api = c.string("api", "");
    p.direction = c.choice("direction", {"h2d", "d2h"}, "h2d");
    p.causal = c.boolean("causal", true);
    p.hidden = c.number("hidden", any, 0.0);
    p.residual = c.boolean("residual", false);
    p.one_kernel = c.boolean("one_kernel", true);
    c.string("note", "");
    c.finish();
    YamlMap me = m.map("measured");
    p.time_s = me.number("time_s", Range::positive(1e6), 0.0);
    p.bandwidth_bytes_s = me.number("bandwidth_bytes_s", Range::positive(1e15), 0.0);
    p.fraction_of_peak = me.number("fraction_of_peak_bandwidth", Range{0, 1.5, true}, 0.0);
    const int given = (p.time_s > 0) + (p.bandwidth_bytes_s > 0) + (p.fraction_of_peak > 0);
    if (given != 1)
      m.fail("measured", "expected exactly one of time_s, bandwidth_bytes_s, fraction_of_peak_bandwidth (got " +
                             std::to_string(given) + ")");
    me.finish();
    m.finish();
    out.push_back(std::move(p));
  }
  top.finish();
  return out;
}

PublishedFit fit_published(const std::vector<PublishedPoint>& points, const std::vector<GpuSpec>& library_gpus) {
  PublishedFit out;
  std::map<std::string, const GpuSpec*> lib;
  for (const GpuSpec& g : library_gpus) lib[g.name] = &g;
  // (gpu, curve) -> points and families
  std::map<std::pair<std::string, CurveKey>, std::pair<std::vector<CurvePoint>, std::set<std::string>>> groups;
  for (const PublishedPoint& p : points) {
    const auto g = lib.find(p.gpu);
    if (p.family == "launch") {
      const double t = p.time_s > 0 ? p.time_s / std::max(1.0, p.calls) : 0;
      std::string line = p.id + ": " + p.gpu + (p.graph ? " (CUDA graph)" : "") + " " + fmt("%.2f", t * 1e6) + " us per launch";
      if (g != lib.end())
        line += "; the hardware file has " + fmt("%.2f", g->second->kernel_latency * 1e6) + " us in a graph, " +
                fmt("%.2f", g->second->host_launch_latency * 1e6) + " us without";
      out.launches.push_back(line);
      continue;
    }
    CurveKey key;
    if (!curve_of(p, g != lib.end() ? g->second : nullptr, key)) {
      out.skipped.push_back(p.id + ": " + (p.family == "gemm" ? p.gpu + " is not in scenarios/hardware/, so whether the GEMM is bandwidth- or compute-bound (and its efficiency) is unknown"
                                                             : "family " + p.family + " has no efficiency curve in the model yet"));
      continue;
    }
    double bytes = 0, x = 0;
    std::string why;
    if (!work_of(p, bytes, x, why)) {
      out.skipped.push_back(p.id + ": " + why);
      continue;
    }
    double e = 0;
    std::string rates;
    if (!efficiency_of(p, g != lib.end() ? g->second : nullptr, key, bytes, e, why, rates)) {
      out.skipped.push_back(p.id + ": " + why);
      continue;
    }
    if (key.kind == PhaseKind::copy && !p.pinned) {
      out.pageable.push_back(p.id + ": " + p.gpu + " " + (key.ceiling == Ceiling::d2h ? "d2h" : "h2d") + ", efficiency " +
                             fmt("%.3f", e) + " (" + rates + "); pageable, kept apart from the pinned curves");
      continue;
    }
    if (e > 1) {
      out.above_ceiling.push_back(p.id + ": efficiency " + fmt("%.3f", e) + " > 1 (" + rates +
                                  "): the point or the ceiling is wrong; left out, not clamped");
      continue;
    }
    auto& grp = groups[{p.gpu, key}];
    grp.first.push_back({p.id, x, e, p.unverified() ? kUnverifiedWeight : 1.0});
    grp.second.insert(p.family);
  }
  for (auto& [k, v] : groups) {
    std::string fam;
    for (const auto& f : v.second) fam += (fam.empty() ? "" : "+") + f;
    out.fits.push_back(fit_points(k.first, fam, k.second, v.first));
  }
  // Library GPUs: own curves, else the same architecture's (the GPU with the most points for it). A
  // GPU outside the library can lend a curve when its points name its architecture: its efficiencies
  // are then fractions of its own peak (published as such), which carry over as any borrow does.
  std::map<std::string, std::string> arch;
  for (const PublishedPoint& p : points)
    if (!p.architecture.empty()) arch[p.gpu] = p.architecture;
  for (const GpuSpec& g : library_gpus) arch[g.name] = g.architecture;
  std::set<CurveKey> keys;
  for (const auto& [k, v] : groups) keys.insert(k.second);
  for (const GpuSpec& g : library_gpus) {
    GpuCalibration gc;
    gc.gpu = g.name;
    gc.architecture = g.architecture;
    for (const CurveKey& key : keys) {
      const CurveFit* own = nullptr;
      const CurveFit* donor = nullptr;
      for (const CurveFit& f : out.fits) {
        if (!f.usable || f.kind != key.kind || f.ceiling != key.ceiling) continue;
        if (f.gpu == g.name) own = &f;
        const auto da = arch.find(f.gpu);
        if (da != arch.end() && da->second == g.architecture && better_donor(f, donor)) donor = &f;
      }
      if (own) {
        gc.curves.push_back(*own);
      } else if (donor) {
        gc.curves.push_back(*donor);
        gc.borrowed[key.name()] = donor->gpu + " (same architecture, " + g.architecture + ")";
      }
    }
    out.gpus.push_back(std::move(gc));
  }
  return out;
}

std::string published_calibration_yaml(const GpuCalibration& g, const std::string& measurements_file,
                                       const std::string& command) {
  std::ostringstream o;
  o << "# GPU efficiencies for " << g.gpu << " from kernel measurements others published on real GPUs\n"
    << "# (" << measurements_file << "; docs/validation/gpu-published.md). Written by `" << command << "`.\n"
    << "# Each curve: e(x) = e_max x / (x + x_half) fitted in log e to the points, sampled over their measured x\n"
    << "# range. Kinds and ceilings without a curve keep the roofline (1.0). Do not edit: re-run the command.\n"
    << "schema: kvsim.calibration/1\n"
    << "name: " << g.gpu << "-published\n"
    << "description: \"" << g.gpu << ": GPU curves from published kernel measurements";
  if (!g.borrowed.empty()) o << " (some borrowed from the same architecture, " << g.architecture << ")";
  std::string flagged;
  for (const CurveFit& f : g.curves)
    if (f.rests_on_unverified) flagged += (flagged.empty() ? "" : ", ") + curve_key_name(f);
  if (!flagged.empty()) o << "; flagged: " << flagged << " rests on unverified readings (docs/validation/gpu-published.md)";
  o << "\"\n";
  o << "gather_half_run_bytes:   # estimates as in roofline.yaml; a measured run_bytes curve replaces them\n"
    << "  hbm: 64\n  dram: 64\n  h2d: 24\n  d2h: 24\n";
  if (g.curves.empty()) {
    o << "curves: []\n";
    return o.str();
  }
  o << "curves:\n";
  for (const CurveFit& f : g.curves) {
    const double lo = f.points.front().x, hi = f.points.back().x;
    std::vector<double> xs;
    if (hi > lo) {
      const int n = 8;
      for (int i = 0; i < n; ++i) xs.push_back(lo * std::pow(hi / lo, i / double(n - 1)));
    } else {
      xs.push_back(lo);
    }
    o << "  - kind: " << to_string(f.kind) << "\n"
      << "    ceiling: " << kCeilingNames[size_t(f.ceiling)] << "\n"
      << "    x: " << kCurveVariableNames[size_t(f.x)] << "\n";
    std::string ids;
    for (size_t i = 0; i < f.points.size() && i < 4; ++i) ids += (i ? ", " : "") + f.points[i].id;
    if (f.points.size() > 4) ids += " and " + std::to_string(f.points.size() - 4) + " more: docs/validation/gpu-published.md";
    const auto b = g.borrowed.find(curve_key_name(f));
    o << "    source: \"" << (f.rests_on_unverified ? "flagged, rests on unverified readings: " : "") << "published: "
      << f.family << " on " << f.gpu
      << (b != g.borrowed.end() ? " (borrowed: " + b->second + ")" : std::string()) << ", " << f.points.size()
      << " points (" << ids << ")"
      << (f.unverified_points > 0 ? ", " + std::to_string(f.unverified_points) + " of them unverified, fitted at weight " +
                                        fmt("%g", kUnverifiedWeight)
                                  : std::string())
      << "; e_max " << fmt("%.4g", f.e_max) << ", x_half " << fmt("%.4g", f.x_half)
      << "; fit error " << fmt("%.1f", 100 * f.fit_error) << "%"
      << (f.heldout_error >= 0 ? ", held-out error " + fmt("%.1f", 100 * f.heldout_error) + "%" : std::string())
      << "\"\n    points: [";
    for (size_t i = 0; i < xs.size(); ++i)
      o << (i ? ", " : "") << "[" << fmt("%.10g", xs[i]) << ", " << fmt("%.4g", std::max(1e-4, f.at(xs[i]))) << "]";
    o << "]\n";
  }
  return o.str();
}

namespace {

std::string x_text(const CurveFit& c, double x) {
  if (c.x == CurveVariable::context_tokens) return fmt("%.3g tokens", x);
  return c.x == CurveVariable::run_bytes ? fmt("%.3g B runs", x) : fmt("%.3g B", x);
}

void fits_table(std::ostringstream& o, const PublishedFit& f) {
  o << "| GPU | curve | families | points | unverified (weight " << fmt("%g", kUnverifiedWeight)
    << ") | held out | e_max | x_half | fit error | held-out error | used |\n"
    << "|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const CurveFit& c : f.fits)
    o << "| " << c.gpu << " | " << curve_key_name(c) << " vs " << kCurveVariableNames[size_t(c.x)] << " | "
      << c.family << " | " << c.points.size() << " | " << c.unverified_points << " | " << c.heldout_points << " | "
      << fmt("%.3f", c.e_max) << " | " << (c.x_half > 0 ? fmt("%.3g", c.x_half) : std::string("— (constant)")) << " | "
      << fmt("%.1f%%", 100 * c.fit_error) << " | "
      << (c.heldout_error >= 0 ? fmt("%.1f%%", 100 * c.heldout_error) : std::string("— (< 4 points)")) << " | "
      << (c.usable ? std::string("yes") : "no: " + c.why_unused)
      << (c.rests_on_unverified ? " — **rests on unverified readings**" : "") << " |\n";
}

// Every curve with unverified points: its efficiency at the smallest, middle and largest measured x
// with every point at weight 1 (before the rule) and with the unverified ones weighted down (after).
void movement_table(std::ostringstream& o, const PublishedFit& f, const std::vector<PublishedPoint>& points) {
  int unverified = 0, chart = 0, chart_verified = 0;
  for (const auto& p : points) unverified += p.unverified(), chart += p.read_off_chart, chart_verified += p.read_off_chart && !p.unverified();
  o << "\n### Unverified points weighted down, and how far that moves each curve\n\n"
    << unverified << " of the " << points.size() << " points are unverified; " << chart << " were read off a chart, "
    << chart_verified << " of those verified (weight 1). "
    << "Efficiency at the smallest, the geometric middle and the largest measured x, every point at weight 1 "
       "(before) and unverified points at weight " << fmt("%g", kUnverifiedWeight) << " (after); errors are then "
       "judged on the verified points alone, unless the curve rests on unverified readings.\n\n"
    << "| GPU | curve | verified points | unverified points | e_max, x_half before | e_max, x_half after | "
       "e(x) before → after | rests on unverified readings |\n|---|---|---|---|---|---|---|---|\n";
  for (const CurveFit& c : f.fits) {
    if (c.unverified_points == 0) continue;
    std::string ids, moves;
    for (const auto& p : c.points)
      if (p.weight < 1) ids += (ids.empty() ? "" : ", ") + p.id;
    for (double x : c.reference_x())
      moves += (moves.empty() ? "" : "; ") + x_text(c, x) + ": " + fmt("%.3f", c.at_all_full(x)) + " → " + fmt("%.3f", c.at(x));
    const auto params = [](double e, double xh) { return fmt("%.3f", e) + ", " + (xh > 0 ? fmt("%.3g", xh) : std::string("—")); };
    o << "| " << c.gpu << " | " << curve_key_name(c) << " | " << int(c.points.size()) - c.unverified_points << " | "
      << c.unverified_points << ": " << ids << " | " << params(c.e_max_all_full, c.x_half_all_full) << " | "
      << params(c.e_max, c.x_half) << " | " << moves << " | " << (c.rests_on_unverified ? "**yes**" : "no") << " |\n";
  }
}

void points_table(std::ostringstream& o, const PublishedFit& f, const std::vector<PublishedPoint>& points) {
  std::map<std::string, const PublishedPoint*> by_id;
  for (const auto& p : points) by_id[p.id] = &p;
  o << "\n### Points\n\n| id | GPU | curve | x | efficiency | weight | source |\n|---|---|---|---|---|---|---|\n";
  for (const CurveFit& c : f.fits)
    for (const auto& p : c.points) {
      const auto it = by_id.find(p.id);
      o << "| " << p.id << " | " << c.gpu << " | " << curve_key_name(c) << " | " << fmt("%.4g", p.x) << " | "
        << fmt("%.3f", p.efficiency) << " | " << (p.weight < 1 ? fmt("%g (unverified)", p.weight) : std::string("1")) << " | "
        << (it != by_id.end() ? it->second->source : "") << " |\n";
    }
}

void gpus_table(std::ostringstream& o, const PublishedFit& f) {
  o << "\n### Library GPUs\n\n| GPU | architecture | curves | borrowed | resting on unverified readings |\n|---|---|---|---|---|\n";
  for (const GpuCalibration& g : f.gpus) {
    std::string b, flagged;
    for (const auto& [k, v] : g.borrowed) b += (b.empty() ? "" : "; ") + k + " from " + v;
    for (const CurveFit& c : g.curves)
      if (c.rests_on_unverified) flagged += (flagged.empty() ? "" : ", ") + curve_key_name(c) + " (" + c.gpu + ")";
    o << "| " << g.gpu << " | " << g.architecture << " | " << g.curves.size() << " | " << (b.empty() ? "—" : b)
      << " | " << (flagged.empty() ? "—" : flagged) << " |\n";
  }
}

void list_section(std::ostringstream& o, const std::string& title, const std::vector<std::string>& lines) {
  if (lines.empty()) return;
  o << "\n### " << title << "\n\n";
  for (const auto& l : lines) o << "- " << l << "\n";
}

}  // namespace

std::string published_report_markdown(const PublishedFit& f, const std::vector<PublishedPoint>& points) {
  std::ostringstream o;
  fits_table(o, f);
  movement_table(o, f, points);
  points_table(o, f, points);
  gpus_table(o, f);
  list_section(o, "Left out: efficiency above 1 (a data error in the point or in the ceiling)", f.above_ceiling);
  list_section(o, "Kept apart: pageable host copies (kvsim's offloading copies are pinned; a pageable copy stages through a bounce buffer)", f.pageable);
  list_section(o, "Launch latency", f.launches);
  list_section(o, "Not fitted", f.skipped);
  return o.str();
}

std::string published_curve_errors_yaml(const PublishedFit& f, const std::string& command) {
  std::vector<double> e;
  for (const CurveFit& c : f.fits)
    if (c.usable) e.insert(e.end(), c.heldout_signed.begin(), c.heldout_signed.end());
  std::sort(e.begin(), e.end());
  auto q = [&](double p) { return e.empty() ? 0.0 : interpolated_quantile(e, p); };
  std::ostringstream o;
  o << "# The held-out errors of every usable published curve (docs/validation/gpu-published.md), pooled:\n"
    << "# each held-out point's predicted / measured kernel time - 1, from the fit without it. A plan's 80%\n"
    << "# range for a phase a measured curve priced is [1 / (1 + p90), 1 / (1 + p10)] of its time\n"
    << "# (model/uncertainty.hpp). Written by `" << command << "`; do not edit.\n"
    << "schema: kvsim.curve_errors/1\n"
    << "heldout:\n"
    << "  points: " << e.size() << "\n"
    << "  p10: " << fmt("%.4f", q(0.1)) << "\n"
    << "  p50: " << fmt("%.4f", q(0.5)) << "\n"
    << "  p90: " << fmt("%.4f", q(0.9)) << "\n";
  return o.str();
}

}  // namespace kvsim::validate
