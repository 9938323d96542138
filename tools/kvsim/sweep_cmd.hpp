// `kvsim sweep SWEEP.yaml -o results.csv [--shard i/N] [--threads N]` and
// `kvsim sweep merge -o merged.csv SHARD.csv...` (docs/sweeps.md).
#pragma once
#include <CLI/CLI.hpp>

namespace kvsim {

struct SweepCommand;
// Registers the subcommand on `app`; the returned object owns its option values.
SweepCommand* add_sweep_command(CLI::App& app);
// Runs it when parsed; returns the exit status, or -1 when `sweep` was not given.
int run_sweep_command(SweepCommand& c);

}  // namespace kvsim
