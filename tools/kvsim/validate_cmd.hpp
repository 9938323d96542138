// `kvsim validate --device cpu|cuda`: the reference kernels timed against the roofline model's
// prediction on this machine's measured ceilings; writes a calibration file (docs/validation/).
#pragma once
#include <CLI/CLI.hpp>

namespace kvsim {

struct ValidateCommand;
// Registers the subcommand on `app`; the returned object owns its option values.
ValidateCommand* add_validate_command(CLI::App& app);
// Runs it when parsed; returns the exit status, or -1 when `validate` was not given. Input errors
// propagate as InputError (the caller prints them and exits 2).
int run_validate_command(ValidateCommand& c, int argc, char** argv);

}  // namespace kvsim
