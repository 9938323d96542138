// `kvsim validate --device emu --predict GPU`: every CUDA validation case (the GPU kit's list) run
// through the emulator at the sizes the kit measures, its counts priced by the kernel time model
// (kernel_time_model.hpp) on a library GPU, and set beside the time the kit measured on that GPU where
// it did (scenarios/calibration/<gpu>-measured.yaml: the efficiency at the point, times the point's
// work at the GPU's datasheet ceilings, which is how the kit computed it). Nothing is fitted: the
// check reports each point's error, the share within 30% and within 2x.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "model/calibration.hpp"
#include "validate/kernel_time_model.hpp"
#include "validate/validate.hpp"

namespace kvsim::validate {

struct TimeCheckPoint {
  std::string case_name, kernels, phase;  // phase: the calibration curve the measurement is under
  std::string kind, ceiling;              // the curve's kind and ceiling
  bool kind_wide = false;                 // the kit writes this case's curve for its whole kind (no phase)
  double size = 0, x = 0;
  std::string x_name;
  CallTime predicted;
  // The case's work at the GPU's datasheet ceilings (the kit's roofline): bound / predicted is the
  // fraction of the bound the model says the kernel reaches.
  double bound_seconds = 0;
  double measured = 0;  // seconds per call on the GPU; 0 = not measured at this point
  double error = 0;     // predicted / measured - 1
  // The measurement is of an earlier version of the case's kernels (its source does not name the case's
  // `kernels` words): shown, not counted in the check's statistics.
  bool earlier_kernel = false;
  uint64_t launches = 0, dram_bytes = 0, host_bytes = 0, requested_bytes = 0, chain_global = 0, chain_shared = 0, barriers = 0;
  double emulated_seconds = 0;  // wall time the emulator took (the check's own cost)
};

struct TimeCheck {
  std::string gpu, measured_name;  // measured_name "" = no measured calibration for this GPU
  std::string command;
  TimeModelGpu model;
  std::vector<TimeCheckPoint> points;
  int compared = 0, within_30 = 0, within_2x = 0;
  int earlier = 0;  // measured points left out: measured on an earlier version of their kernels
  double median_abs_error = 0;
};

// Runs each case at each of its grid sizes, in the emulator at full size. `measured` may be null.
// `progress` gets one line per point.
TimeCheck check_kernel_times(const std::vector<Case>& cases, const TimeModelGpu& g, const Calibration* measured,
                             const std::string& measured_name,
                             const std::function<void(const std::string&)>& progress = {});

std::string time_check_markdown(const TimeCheck& t);
std::string time_check_json(const TimeCheck& t);

}  // namespace kvsim::validate
