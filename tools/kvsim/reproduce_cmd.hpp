// `kvsim reproduce [PAPER]`: every paper scenario (scenarios/papers/<paper>/*.yaml) through the
// planner, each prediction next to the published figure with its relative error
// (docs/reproductions.md).
#pragma once
#include <CLI/CLI.hpp>

namespace kvsim {

struct ReproduceCommand;
// Registers the subcommand on `app`; the returned object owns its option values.
ReproduceCommand* add_reproduce_command(CLI::App& app);
// Runs it when parsed; returns the exit status, or -1 when `reproduce` was not given. Input errors
// propagate as InputError (the caller prints them and exits 2).
int run_reproduce_command(ReproduceCommand& c);

}  // namespace kvsim
