// GPU efficiencies from kernel measurements that others published (`kvsim calibrate published`).
// kvsim has no GPU of its own, so the GPU side of a calibration comes from real kernels measured on
// real GPUs by others: each point of scenarios/measurements/gpu-published.yaml is one kernel or copy
// at an exact configuration with its source (docs/validation/gpu-published.md). Only kernel-level
// figures go in; a paper's end-to-end TPOT or throughput never does (those are what the model is
// checked against).
//
// Each point becomes an efficiency on one ceiling — achieved bytes/s over the GPU's datasheet rate
// (scenarios/hardware/<gpu>.yaml), or the fraction the source published — at one x (the work's bytes,
// or a copy's run length), and so a point of an efficiency curve (model/calibration.hpp):
//
//   family                              kind       ceiling  x          bytes of the work
//   decode_attention, sparse_attention  attention  hbm      bytes      B n (K+V row) + B Hq d b (q in, o out);
//                                                                      MLA: B n Hkv d b (one latent row per
//                                                                      token, K and V share it) + B Hq (d + dv) b
//   h2d_copy, d2h_copy                  copy       h2d/d2h  run_bytes  one contiguous run of `bytes`
//   scattered_copy                      copy       h2d/d2h  run_bytes  `bytes` in runs of `run_bytes`
//   gather                              gather     hbm      run_bytes  2 x `bytes` (rows read, then written)
//   gemv                                gemm       hbm      bytes      the n x k weights + vectors
//   gemm below the GPU's ridge          gemm       hbm      bytes      n x k weights + m x k in + m x n out
//   gemm above it                       gemm       tensor   bytes      the same bytes (x); 2mnk FLOPs / tensor peak
//   topk                                select     hbm      bytes      rows x (2 n + k) x 4: the fp32 scores read
//                                                                      twice, k indices written (blocks.hpp select)
//   prefill_attention                   prefill_   tensor   context_   FLOPs as the model's phase: B Hq scores
//                                       attention           tokens     (4 d + 5), scores s (s + 1) / 2 (causal);
//                                                                      non-causal and fp8 points are not fitted
//   rmsnorm                             elementwise hbm      bytes      rows x hidden x b x 2 (x in, y out), x 4
//                                                                      with the fused residual add; one kernel only
//   launch                              (reported next to the hardware file's launch latency)
//
// Per GPU and curve, the fit is a saturating curve e(x) = e_max x / (x + x_half) — small work cannot
// fill the GPU, large work approaches a plateau — weighted least squares in log e, sampled over the
// measured x range into the calibration file. Every third interior point (in x order) is held out of a
// second fit and predicted by it: the held-out error. A library GPU with no points of its own for a
// curve borrows the curve of a GPU of the same architecture (the file says which); the report lists
// every borrow. A GPU outside the library lends only when its points state its `architecture`.
//
// What the data may not do (issue 27): a point whose `verified:` starts with "no" (its value could not
// be checked against its source) is fitted at kUnverifiedWeight, not 1, and does not count in the fit
// and held-out errors while the verified points make a curve on their own; a curve they cannot make
// (fewer than kMinCurvePoints verified points, or all at one x) is still fitted, from every point, and
// flagged `rests_on_unverified` in the report, the calibration file's source and its description.
// A point whose efficiency comes out above 1 is a data error (the point, or the ceiling it is divided
// by): it is left out, with the rates, never clamped.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "model/calibration.hpp"
#include "model/hardware.hpp"

namespace kvsim::validate {

struct PublishedPoint {
  std::string id, gpu, family, kernel, dtype, api, source, verified, note;
  std::string architecture;  // only for a GPU outside the library: lets its curves lend to that architecture
  int line = 0;
  // configuration (0 = not given)
  double batch = 1, context_tokens = 0, q_heads = 0, kv_heads = 0, head_dim = 0, page_size = 0;
  // attention "mla": K and V are one latent row of head_dim elements per token and KV head (FlashMLA's
  // d = 576: the 512 compressed KV plus 64 RoPE dims), of which V is the first head_dim_v (dv = 512).
  std::string attention = "mha";
  double head_dim_v = 0;
  double kv_bytes_per_token = 0;  // overrides the K and V bytes of one token (all KV heads), for layouts the two above do not describe
  double bytes = 0, calls = 1, run_bytes = 0, m = 0, n = 0, k = 0, rows = 1;
  bool pinned = true, graph = false, read_off_chart = false;
  bool causal = true;     // prefill_attention: a causal mask (only causal points make the model's curve)
  double hidden = 0;      // rmsnorm: the row width
  bool residual = false;  // rmsnorm: fused with the residual add (reads x and the residual, writes both)
  bool one_kernel = true; // rmsnorm: one fused kernel (false: an eager module of several; not fitted)
  std::string direction;  // scattered_copy: "h2d" (default) or "d2h"
  // measured: exactly one is > 0
  double time_s = 0, bandwidth_bytes_s = 0, fraction_of_peak = 0;
  // `verified:` starts with "no": the value could not be checked against its source.
  bool unverified() const;
};

// Loads scenarios/measurements/gpu-published.yaml (schema kvsim.measurements/1), strictly: every
// error names the file, line, field, value and what is allowed.
std::vector<PublishedPoint> load_published(const std::string& path);

// One point as an efficiency on its curve.
inline constexpr int kMinCurvePoints = 3;
inline constexpr double kMaxFitError = 0.30;
// The least-squares weight of an unverified point. Its value is someone's reading we could not check,
// of unknown error: ten of them count as one checked point, so a few cannot decide a curve that has
// checked points, yet they still give a shape where nothing checked exists.
inline constexpr double kUnverifiedWeight = 0.1;

struct CurvePoint {
  std::string id;
  double x = 0, efficiency = 0;
  double weight = 1;  // kUnverifiedWeight for an unverified point
};

// The fit of one curve on one GPU.
struct CurveFit {
  std::string gpu;        // whose points
  std::string family;     // families merged into the curve, e.g. "decode_attention+sparse_attention"
  PhaseKind kind = PhaseKind::attention;
  Ceiling ceiling = Ceiling::hbm;
  CurveVariable x = CurveVariable::bytes;
  std::vector<CurvePoint> points;
  double e_max = 1, x_half = 0;      // e(x) = e_max x / (x + x_half); x_half = 0: a constant
  // Over the judged points (the verified ones, or every point when the curve rests on unverified ones):
  double fit_error = 0;              // median |e_fit / e_measured - 1| (time error)
  double heldout_error = -1;         // median over held-out points of the fit without them; -1: too few points
  int heldout_points = 0;
  std::vector<double> heldout_signed;  // each held-out point's predicted / measured time - 1
  int unverified_points = 0;         // fitted at kUnverifiedWeight
  // Fewer than kMinCurvePoints verified points at two or more x: the curve's shape is the unverified
  // readings'. Still fitted (it is the only curve there is), and said wherever the curve is used.
  bool rests_on_unverified = false;
  // The same points all at weight 1 (what the fit was before unverified points were weighted down), to
  // show how far the rule moves the curve; equal to e_max, x_half when no point is unverified.
  double e_max_all_full = 1, x_half_all_full = 0;
  // Whether calibration files use it: at least kMinCurvePoints points at two or more x, and a fit
  // error of at most kMaxFitError (larger means the points disagree — mixed kernels or conditions —
  // and no one curve stands for them). `why_unused` says which rule failed.
  bool usable = false;
  std::string why_unused;
  double at(double x) const { return x_half > 0 ? e_max * x / (x + x_half) : e_max; }
  double at_all_full(double x) const { return x_half_all_full > 0 ? e_max_all_full * x / (x + x_half_all_full) : e_max_all_full; }
  // The three x a curve's movement is shown at: the smallest measured, the geometric middle, the largest.
  std::vector<double> reference_x() const;
};

// What a library GPU's calibration is made of.
struct GpuCalibration {
  std::string gpu, architecture;
  std::vector<CurveFit> curves;                  // own fits and borrowed ones
  std::map<std::string, std::string> borrowed;   // curve key -> "GPU (why)"
};

struct PublishedFit {
  std::vector<CurveFit> fits;                    // every GPU with points, library or not
  std::vector<GpuCalibration> gpus;              // every library GPU
  std::vector<std::string> skipped;              // points not fitted, with why (a GPU outside the library, ...)
  std::vector<std::string> above_ceiling;        // data errors: efficiency above 1, with the rates; not fitted
  // Pageable host copies (`pinned: false`), kept apart with their rates: a pageable copy stages through
  // the driver's pinned bounce buffer, a different path from the pinned copies kvsim's offloading
  // policies make and its PCIe curves describe; not fitted.
  std::vector<std::string> pageable;
  std::vector<std::string> launches;             // launch measurements next to the hardware files' values
};

// Fits every curve. `library_gpus` are the GPUs calibration files are written for.
PublishedFit fit_published(const std::vector<PublishedPoint>& points, const std::vector<GpuSpec>& library_gpus);

// The calibration file of one library GPU (kvsim.calibration/1, named "<gpu>-published").
std::string published_calibration_yaml(const GpuCalibration& g, const std::string& measurements_file,
                                       const std::string& command);

// docs/validation/gpu-published.md's tables: per family and GPU, points, fit and held-out errors,
// sources; the unverified points and how far weighting them down moves each curve; then the borrows
// and what was left out (efficiencies above 1 first).
std::string published_report_markdown(const PublishedFit& f, const std::vector<PublishedPoint>& points);

// The held-out errors of every usable curve, pooled (signed: predicted / measured time - 1): what a
// plan's range takes for a phase a measured curve priced (model/uncertainty.hpp). A
// `kvsim.curve_errors/1` file: the count and the 10th, 50th and 90th percentiles.
std::string published_curve_errors_yaml(const PublishedFit& f, const std::string& command);

}  // namespace kvsim::validate
