// Efficiencies: the fraction of each hardware ceiling a kind of kernel reaches. They come from files
// (scenarios/calibration/*.yaml) written by `kvsim validate` from measured kernels — never fitted to
// published end-to-end results. `roofline.yaml` (all 1.0) is the uncalibrated bound.
#pragma once
#include <array>
#include <string>

#include "model/phase.hpp"
#include "model/yaml_reader.hpp"

namespace kvsim {

// One efficiency per ceiling, each in (0, 1].
enum class Ceiling { tensor, simt, host_compute, hbm, dram, h2d, d2h, link, count };
inline constexpr std::array<std::string_view, size_t(Ceiling::count)> kCeilingNames = {
    "tensor", "simt", "host_compute", "hbm", "dram", "h2d", "d2h", "link"};

struct Efficiency {
  std::array<double, size_t(Ceiling::count)> of{};  // indexed by Ceiling
  double operator[](Ceiling c) const { return of[size_t(c)]; }
};

struct Calibration {
  std::string name = "roofline";
  std::string description = "uncalibrated: every efficiency 1.0 (the roofline bound)";
  bool calibrated = false;  // false when every efficiency is the ideal 1.0
  std::array<Efficiency, size_t(PhaseKind::count)> per_kind;  // defaults merged with overrides
  // Gather granularity: a gather whose contiguous runs are `run` bytes long reaches
  //   run / (run + half_run[c])
  // of ceiling c's efficiency (half of it at run = half_run). It models the fixed cost per run — a
  // DRAM burst and row activation, a PCIe transaction header and request round trip — that a
  // streaming access amortizes and a token-granular gather does not. 0 = no penalty.
  std::array<double, size_t(Ceiling::count)> half_run_bytes{};

  Calibration();  // all 1.0
  const Efficiency& operator[](PhaseKind k) const { return per_kind[size_t(k)]; }
  // Efficiency of ceiling c for a phase of kind k whose gathers have runs of `run_bytes` (0 = none).
  double efficiency(PhaseKind k, Ceiling c, double run_bytes) const {
    const double e = per_kind[size_t(k)][c];
    const double h = half_run_bytes[size_t(c)];
    return run_bytes > 0 && h > 0 ? e * run_bytes / (run_bytes + h) : e;
  }
};

Calibration load_calibration(YamlMap m);

}  // namespace kvsim
