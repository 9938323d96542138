// Efficiencies: the fraction of each hardware ceiling a kind of kernel reaches. They come from files
// (scenarios/calibration/*.yaml) written by `kvsim validate` from measured kernels — never fitted to
// published end-to-end results. `roofline.yaml` (all 1.0) is the uncalibrated bound.
//
// An efficiency is a constant per (phase kind, ceiling), or — where it depends on shape — a measured
// curve: efficiency against one shape variable (a gather's contiguous run length, an attention's
// context length or batch, a copy's size) as (x, efficiency) points. Between points the planner
// interpolates linearly in log x; outside the measured range it uses the nearest end value and the
// answer flags the phase (PhaseResult::extrapolated; "extrapolated_phases" in the plan's JSON and a
// line in its table), because that number was not measured.
#pragma once
#include <array>
#include <atomic>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "model/phase.hpp"
#include "core/yaml_reader.hpp"

namespace kvsim {

// One efficiency per ceiling, each in (0, 1].
enum class Ceiling { tensor, simt, host_compute, hbm, dram, h2d, d2h, link, count };
inline constexpr std::array<std::string_view, size_t(Ceiling::count)> kCeilingNames = {
    "tensor", "simt", "host_compute", "hbm", "dram", "h2d", "d2h", "link"};

struct Efficiency {
  std::array<double, size_t(Ceiling::count)> of{};  // indexed by Ceiling
  double operator[](Ceiling c) const { return of[size_t(c)]; }
};

// The shape variable a curve is measured against (the YAML field `x`).
enum class CurveVariable {
  run_bytes,       // Phase::run_bytes: contiguous bytes per run of a gather
  bytes,           // the phase's bytes per instance (per layer) on the curve's ceiling; for a compute
                   // ceiling, all its memory bytes per instance
  context_tokens,  // Phase::context_tokens: tokens each sequence attends to
  batch,           // Phase::batch: sequences in the step
  count
};
inline constexpr std::array<std::string_view, size_t(CurveVariable::count)> kCurveVariableNames = {
    "run_bytes", "bytes", "context_tokens", "batch"};

struct EfficiencyCurve {
  PhaseKind kind = PhaseKind::gemm;
  std::string phase;  // only phases of this name (a policy's phase name); empty = every phase of `kind`
  Ceiling ceiling = Ceiling::dram;
  CurveVariable x = CurveVariable::bytes;
  std::vector<std::pair<double, double>> points;  // (x > 0, efficiency in (0, 1]), x strictly increasing
  std::string source;                             // the `source` field: how the points were measured

  // Log-x linear interpolation; the end value outside the range. *outside says whether x was outside.
  double at(double x, bool* outside = nullptr) const;
};

// How the host runs its kernels as separate calls on its cores, for host phases that declare their
// calls and pieces (Phase::lanes; their launches are host calls): measured by `kvsim validate --device cpu` on the
// host the calibration is for (validate/host_threads.hpp), and borrowed with the host's efficiencies by
// a host that has no measurement of its own. 0 = not measured: no call or region cost and no per-core
// DRAM limit (so the uncalibrated roofline stays a bound).
struct HostThreads {
  double call_s = 0;     // one call of a small host kernel, fixed cost (s)
  double region_s = 0;   // one parallel region's fork and join over the host's threads (s)
  double core_dram = 0;  // bytes/s one core streams from DRAM with the others idle (STREAM triad, 1 thread)
  // One core's clock on the host they were measured on (Hz; 0 = not given): a host that borrows them
  // scales call_s and region_s by this over its own clock_ghz (make_machine; the rule of
  // model/host_ops.hpp: per-call costs are single-threaded instruction streams).
  double clock_hz = 0;
  bool measured() const { return call_s > 0 || region_s > 0 || core_dram > 0; }
};

// Where a constant efficiency (per kind and ceiling) came from: the built-in 1.0 (no field set it), the
// file's `efficiency:` defaults, its `phases:` overrides written by hand, or `phases:` overrides that
// `kvsim validate` measured (the file says `phases_measured: true`). Only the last is a measurement; a
// GPU phase whose binding ceiling runs at any other constant, with no curve, is flagged as unmeasured
// in the plan (PlanResult::unmeasured_phases).
enum class ConstantOrigin : uint8_t { builtin, efficiency_default, phases_override, measured };

struct Calibration {
  std::string name = "roofline";
  std::string description = "uncalibrated: every efficiency 1.0 (the roofline bound)";
  bool calibrated = false;  // false when every efficiency is the ideal 1.0 and there is no curve
  std::array<Efficiency, size_t(PhaseKind::count)> per_kind;  // defaults merged with overrides
  // Gather granularity: a gather whose contiguous runs are `run` bytes long reaches
  //   run / (run + half_run[c])
  // of ceiling c's efficiency (half of it at run = half_run). It models the fixed cost per run — a
  // DRAM burst and row activation, a PCIe transaction header and request round trip — that a
  // streaming access amortizes and a token-granular gather does not. 0 = no penalty. A measured
  // run_bytes curve for the phase replaces this estimate.
  std::array<double, size_t(Ceiling::count)> half_run_bytes{};
  std::vector<EfficiencyCurve> curves;
  HostThreads host_threads;  // `host_threads:` (host side)
  std::array<std::array<ConstantOrigin, size_t(Ceiling::count)>, size_t(PhaseKind::count)> origin{};
  // The calibration each ceiling's constants were read from (empty: this one, `name`;
  // combine_calibrations keeps the GPU side's for GPU ceilings and the host side's for host ceilings).
  std::array<std::string, size_t(Ceiling::count)> constants_from;

  Calibration();  // all 1.0
  const Efficiency& operator[](PhaseKind k) const { return per_kind[size_t(k)]; }
  // Efficiency of ceiling c for a phase of kind k whose gathers have runs of `run_bytes` (0 = none);
  // constants only (no phase to look curves up by).
  double efficiency(PhaseKind k, Ceiling c, double run_bytes) const { return per_kind[size_t(k)][c] * run_share(c, run_bytes); }
  // The gather penalty alone: run / (run + half_run[c]), 1 for one contiguous block (run_bytes 0) or
  // no penalty on c. The kernel models apply it too (model/kernel_model.cpp), so none prices a gather
  // below the bound printed beside it.
  double run_share(Ceiling c, double run_bytes) const {
    const double h = half_run_bytes[size_t(c)];
    return run_bytes > 0 && h > 0 ? run_bytes / (run_bytes + h) : 1.0;
  }
  // Efficiency of ceiling c for phase p: the curve for p's name and kind, else the curve for p's kind,
  // else the constant with the gather penalty. `bytes_per_instance` is the x of a `bytes` curve.
  // *outside (when given) says whether a curve was read outside its measured range (extrapolated);
  // *from_curve (when given) whether a curve gave the efficiency (false: the constant).
  double efficiency(const Phase& p, Ceiling c, double bytes_per_instance, bool* outside = nullptr,
                    bool* from_curve = nullptr) const;
  // Whether the constant of kind k on ceiling c is a measurement (ConstantOrigin::measured).
  bool constant_measured(PhaseKind k, Ceiling c) const {
    return origin[size_t(k)][size_t(c)] == ConstantOrigin::measured;
  }
  // Where that constant came from, in words: "<calibration> phases.<kind>.<ceiling>",
  // "<calibration> efficiency.<ceiling>", or "<calibration> (no value: the roofline's 1.0)".
  std::string constant_source(PhaseKind k, Ceiling c) const;
  // The curve that applies to phase p on ceiling c, or nullptr.
  const EfficiencyCurve* curve_for(const Phase& p, Ceiling c) const;
  // Indexes `curves` by (kind, ceiling) so that curve_for looks only at the curves of its key (most
  // phase/ceiling pairs have none). The loaders call it; after changing `curves` by hand, call it again
  // (until then curve_for scans every curve, which gives the same answer).
  void index_curves();

 private:
  std::array<std::vector<uint16_t>, size_t(PhaseKind::count) * size_t(Ceiling::count)> by_key_;
  size_t indexed_ = size_t(-1);  // curves.size() when indexed; another size: scan them all
};

Calibration load_calibration(YamlMap m);

// The GPU ceilings (tensor, simt, hbm, h2d, d2h, link) of `gpu_side` with the host ceilings
// (host_compute, dram) of `host_side`: constants, gather costs and curves. This is how the default
// calibration of a scenario is put together from a GPU's published-measurement file and a host's
// measured file (model/scenario.cpp, docs/scenarios.md).
Calibration combine_calibrations(const Calibration& gpu_side, const Calibration& host_side, std::string name,
                                 std::string description);
bool is_host_ceiling(Ceiling c);

// A phase's bytes per instance on ceiling c (the x of a `bytes` curve): that tier's bytes, or for a
// compute ceiling all memory bytes, divided by the phase's repeat.
double phase_bytes_on(const Phase& p, Ceiling c);

}  // namespace kvsim
