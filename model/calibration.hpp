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

  Calibration();  // all 1.0
  const Efficiency& operator[](PhaseKind k) const { return per_kind[size_t(k)]; }
};

Calibration load_calibration(YamlMap m);

}  // namespace kvsim
