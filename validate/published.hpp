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
//   decode_attention, sparse_attention  attention  hbm      bytes      B n (K+V row) + B Hq d b (q in, o out)
//   h2d_copy, d2h_copy                  copy       h2d/d2h  run_bytes  one contiguous run of `bytes`
//   scattered_copy                      copy       h2d/d2h  run_bytes  `bytes` in runs of `run_bytes`
//   gemv                                gemm       hbm      bytes      the n x k weights + vectors
//   gemm below the GPU's ridge          gemm       hbm      bytes      n x k weights + m x k in + m x n out
//   gemm above it                       gemm       tensor   bytes      the same bytes (x); 2mnk FLOPs / tensor peak
//   topk                                select     hbm      bytes      rows x n fp32 scores
//   launch                              (reported next to the hardware file's launch latency)
//
// Per GPU and curve, the fit is a saturating curve e(x) = e_max x / (x + x_half) — small work cannot
// fill the GPU, large work approaches a plateau — least squares in log e, sampled over the measured x
// range into the calibration file. Every third interior point (in x order) is held out of a second fit
// and predicted by it: the held-out error. A library GPU with no points of its own for a curve borrows
// the curve of a GPU of the same architecture (the file says which); the report lists every borrow.
// A GPU outside the library lends only when its points state its `architecture`.
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
  double kv_bytes_per_token = 0;  // overrides 2 kv_heads head_dim b (e.g. an MLA latent row)
  double bytes = 0, calls = 1, run_bytes = 0, m = 0, n = 0, k = 0, rows = 1;
  bool pinned = true, graph = false, read_off_chart = false;
  std::string direction;  // scattered_copy: "h2d" (default) or "d2h"
  // measured: exactly one is > 0
  double time_s = 0, bandwidth_bytes_s = 0, fraction_of_peak = 0;
};

// Loads scenarios/measurements/gpu-published.yaml (schema kvsim.measurements/1), strictly: every
// error names the file, line, field, value and what is allowed.
std::vector<PublishedPoint> load_published(const std::string& path);

// One point as an efficiency on its curve.
inline constexpr int kMinCurvePoints = 3;
inline constexpr double kMaxFitError = 0.30;

struct CurvePoint {
  std::string id;
  double x = 0, efficiency = 0;
  bool clamped = false;  // the achieved rate exceeded the datasheet ceiling (efficiency set to 1)
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
  double fit_error = 0;              // median |e_fit / e_measured - 1| over every point (time error)
  double heldout_error = -1;         // median over held-out points of the fit without them; -1: too few points
  int heldout_points = 0;
  // Whether calibration files use it: at least kMinCurvePoints points at two or more x, and a fit
  // error of at most kMaxFitError (larger means the points disagree — mixed kernels or conditions —
  // and no one curve stands for them). `why_unused` says which rule failed.
  bool usable = false;
  std::string why_unused;
  double at(double x) const { return x_half > 0 ? e_max * x / (x + x_half) : e_max; }
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
  std::vector<std::string> launches;             // launch measurements next to the hardware files' values
};

// Fits every curve. `library_gpus` are the GPUs calibration files are written for.
PublishedFit fit_published(const std::vector<PublishedPoint>& points, const std::vector<GpuSpec>& library_gpus);

// The calibration file of one library GPU (kvsim.calibration/1, named "<gpu>-published").
std::string published_calibration_yaml(const GpuCalibration& g, const std::string& measurements_file,
                                       const std::string& command);

// docs/validation/gpu-published.md's tables: per family and GPU, points, fit and held-out errors,
// sources; then the borrows and what was left out.
std::string published_report_markdown(const PublishedFit& f, const std::vector<PublishedPoint>& points);

}  // namespace kvsim::validate
