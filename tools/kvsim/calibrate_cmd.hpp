// `kvsim calibrate published`: GPU efficiency curves fitted to kernel measurements others published
// (scenarios/measurements/gpu-published.yaml), one calibration file per library GPU, and the report
// docs/validation/gpu-published.md (validate/published.hpp).
#pragma once
#include <CLI/CLI.hpp>

namespace kvsim {

struct CalibrateCommand;
CalibrateCommand* add_calibrate_command(CLI::App& app);
// Runs it when parsed; returns the exit status, or -1 when `calibrate` was not given.
int run_calibrate_command(CalibrateCommand& c, int argc, char** argv);

}  // namespace kvsim
