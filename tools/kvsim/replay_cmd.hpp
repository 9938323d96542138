// `kvsim replay TRACE [SCENARIO]`: every policy really selects on a trace; quality per policy (and per
// budget) next to the simulated TPOT/throughput/memory with the measured statistics (docs/replay.md).
#pragma once
#include <CLI/CLI.hpp>

namespace kvsim {

struct ReplayCommand;
// Registers the subcommand on `app`; the returned object owns its option values.
ReplayCommand* add_replay_command(CLI::App& app);
// Runs it when parsed; returns the exit status, or -1 when `replay` was not given. Input errors
// propagate as InputError (the caller prints them and exits 2).
int run_replay_command(ReplayCommand& c);

}  // namespace kvsim
