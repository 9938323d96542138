// Model-versus-kernel validation (`kvsim validate`): every reference kernel is run over a grid of
// sizes, timed properly (warm-up, repeats, median; cold caches), and its time is compared with the
// roofline model's prediction for the same machine — the phase's FLOPs and bytes against the ceilings
// measured on that machine. Per phase it reports the measured time, the uncalibrated prediction, the
// error and the fitted efficiency; the fitted efficiencies become a calibration file (efficiency
// curves, calibration.hpp), and the calibrated prediction is checked again on a second, independent
// measurement that also includes sizes between the fitted ones (held out).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "model/calibration.hpp"
#include "model/phase.hpp"
#include "model/roofline.hpp"

namespace kvsim::validate {

// One timed instance of a kernel at one size: `run` executes it once (cycling through enough copies of
// its inputs that they are not cache-resident), `work` is what the model counts for it.
struct Instance {
  std::function<void()> run;
  Work work;
  double run_bytes = 0;
  double context_tokens = 0;
  double batch = 1;
};

// An instance whose inputs are `copies` independent replicas (each `replica_bytes` of inputs, enough
// of them to fill cold_bytes, at most max_copies), run in turn so each run finds its inputs evicted
// from the caches — as a decode step finds each layer's KV. build(seed) makes one replica and
// returns the call that runs the kernel on it. Work and shape are the caller's to fill in.
Instance cycled(double replica_bytes, double cold_bytes, uint32_t seed,
                const std::function<std::function<void()>(uint32_t)>& build, int max_copies = 256);

// A kernel case: which model phase it is (name, kind), which shape variable its efficiency curve is
// measured against, the grid of its size parameter, and how to build an instance at a size.
struct Case {
  std::string phase;         // the calibration curve's `phase` (a policy phase name where one exists)
  bool kind_wide = false;    // write the curve for every phase of `kind` (phase left empty)
  PhaseKind kind;
  CurveVariable x;
  std::string kernels;       // the kvsim::ref kernels it runs, for the report
  std::vector<double> grid;  // size parameters (fit pass); the held-out pass adds their geometric midpoints
  double quick = 0;          // the one size --quick runs
  // Builds one instance at size s for thread `thread`; `cold_bytes` is how many bytes of inputs to
  // cycle through (0 = one copy).
  std::function<Instance(double s, int thread, double cold_bytes)> make;
  // The model phases this kernel implements (policies' phase names, all of this case's kind): the
  // calibration writes one curve per name, the exact keys `kvsim plan` looks curves up by. Empty: one
  // curve under `phase` (a host case's phase is already the model's name).
  std::vector<std::string> model_phases = {};
  // A size small enough to run through the CUDA emulator (its plumbing test); 0 = `quick`.
  double emu_size = 0;
};

// While one is alive (on any thread), the emulated CUDA cases build their instances at the sizes the GPU
// kit measures instead of the shrunk ones their plumbing tests use: the kernel time model's check
// (kernel_time_check.hpp) runs them as they were measured.
class FullSizeEmulation {
 public:
  FullSizeEmulation();
  ~FullSizeEmulation();
  FullSizeEmulation(const FullSizeEmulation&) = delete;
  FullSizeEmulation& operator=(const FullSizeEmulation&) = delete;
  static bool on();
};

// The ceilings of the machine the kernels run on.
struct Ceilings {
  std::string device = "cpu";  // "cpu" or "cuda"
  std::string name;            // host or GPU name
  std::string source;          // how they were obtained (command, file)
  int threads = 1;             // instances run at once (CPU cores; 1 on the GPU)
  Machine machine;             // host_compute + dram for the CPU; simt + hbm for the GPU
  ComputeUnit unit = ComputeUnit::host;
};

struct Options {
  bool quick = false;
  int min_repeats = 7;            // timed samples per point (median)
  double min_seconds = 0.25;      // per point, at least this much timed
  double sample_seconds = 2e-3;   // a sample runs the kernel enough times to last this long
  double cold_bytes = 96e6;       // inputs cycled per thread (> 2x this machine's 32 MiB L3)
  std::string calibration_name = "measured";
  std::string command;            // the command line, recorded in the file
  std::string filter;             // only cases whose phase name contains this
};

// The phase the model prices for instances of case c run at once on ce (their work summed; named by the
// case's first model phase; launches left out), as `run` fits it.
Phase case_phase(const Case& c, const std::vector<Instance>& inst, const Ceilings& ce);
// Where that phase's point sits: the ceiling the ideal roofline says binds, the curve variable's value
// there, the ideal roofline's seconds, and the gather penalty `run` divides a non-run_bytes curve's
// efficiency by (so a measured efficiency e at this point is a time of ideal_seconds / (e x penalty)).
struct CasePoint {
  Ceiling ceiling = Ceiling::hbm;
  double x = 0, ideal_seconds = 0, penalty = 1;
};
CasePoint case_point(const Case& c, const Phase& ph, const Ceilings& ce, const Calibration& uncal);

// Times `samples` runs of `inner` calls each; returns seconds per call of every sample.
using Timer = std::function<std::vector<double>(const std::vector<Instance>& instances, int inner, int samples)>;

// One measured point.
struct Point {
  std::string phase;
  PhaseKind kind;
  std::string pass;       // "fit" or "holdout"
  double size = 0;        // the case's size parameter
  double x = 0;           // the curve variable's value
  Ceiling ceiling = Ceiling::dram;  // the ceiling the uncalibrated roofline says binds
  double measured = 0;    // median seconds
  double spread = 0;      // (p90 - p10) / median of the samples
  int samples = 0;
  double predicted = 0, error = 0;                  // uncalibrated (the library's roofline.yaml)
  double efficiency = 0;                            // fitted (fit pass) or implied (holdout)
  double predicted_calibrated = 0, error_calibrated = 0;
  double flops = 0, bytes = 0;
  // A fit point faster than its ceiling allows (efficiency above 1: the ceiling or the timing is
  // wrong): reported, and left out of the curve, never clamped to 1.
  bool above_ceiling = false;
};

struct Summary {
  std::string phase;
  PhaseKind kind;
  Ceiling ceiling;
  CurveVariable x;
  int points = 0;
  double median_abs_error = 0, median_abs_error_calibrated = 0, max_abs_error_calibrated = 0;
  double efficiency_min = 0, efficiency_max = 0;
};

struct Result {
  Ceilings ceilings;
  std::vector<Point> points;
  std::vector<Summary> summaries;
  std::string calibration_yaml;  // the file `--out` writes
  Calibration calibration;       // that file, loaded back (what the calibrated predictions used)
};

// The host kernels (kernels/reference) as validation cases.
// The host kernels as cases: the optimized ones (kernels/host/) where they exist and the reference
// elsewhere (optimized = true, what `kvsim validate --device cpu` measures by default), or the reference
// kernels throughout (`--kernels reference`, the profile of the plain kernels).
std::vector<Case> host_cases(bool optimized = true);
// The scattered-row read ceiling of the gathered host kernels: for each of `cpu_attention` and
// `cpu_rerank`, a case with the same rows, the same index list (same seeds) and the same cycling that
// only reads the rows (a sum of their floats), prefetching `prefetch` rows ahead (0: none) the way the
// kernels do. Phase names `gather_read/<kernel>/pf<prefetch>`; their work counts the kernel's bytes.
// `with_fma`: the same reads with 4 FMAs per loaded vector in between (`.../pf<prefetch>+fma4`), to
// measure whether reads overlap arithmetic; not a ceiling. Not part of host_cases(): `kvsim bench`
// measures them next to the kernels.
std::vector<Case> gather_read_cases(const std::vector<int>& prefetch = {0, 8, 16, 32},
                                    const std::vector<int>& with_fma = {16});
// The CPU timer: every instance on its own thread at once, the time of the slowest — by each
// thread's CPU clock (default; robust on a machine shared with other processes) or the wall clock.
Timer cpu_timer(bool wall_clock = false);
// The host's DRAM bandwidth (STREAM triad, 4 MiB arrays cycled through cold_bytes) and fp32 FLOP/s
// (Eigen SGEMM 256^3), `threads` instances at once, timed by `timer` exactly like the kernels (median).
struct HostCeilingsMeasured {
  double dram_bandwidth = 0, fp32 = 0;
};
HostCeilingsMeasured measure_host_ceilings(int threads, const Timer& timer, const Options& o);
// The simple CUDA kernels (empty without CUDA built in) and the CUDA-event timer (one instance).
std::vector<Case> cuda_cases();
// The optimized CUDA kernels' cases (cuda_optimized_cases.inc); cuda_cases() includes them.
std::vector<Case> cuda_optimized_cases();
// The same cases over the emulator's launchers (every build): the kernels run on the CPU, so only a
// fake clock can time them (tests) — what `make gpu-validate` runs is tested here before any GPU.
std::vector<Case> emulated_cuda_cases();
Timer cuda_timer();

// Runs the cases, fits, writes and reloads the calibration, and evaluates it. `uncalibrated` is the
// model the errors are first stated against (the library's roofline.yaml). Progress goes to stderr.
Result run(const std::vector<Case>& cases, const Ceilings& ceilings, const Timer& timer, const Options& o,
           const Calibration& uncalibrated);

std::string report_table(const Result& r);
std::string report_csv(const Result& r);
std::string report_json(const Result& r);

}  // namespace kvsim::validate
