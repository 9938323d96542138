// `kvsim trace info | gen | slice | capture | fit`: look inside a trace, make a synthetic one, cut one
// down, record one from a real model, fit the generator to real ones.
#pragma once
#include <CLI/CLI.hpp>

namespace kvsim {

struct TraceCommands;
// Registers the subcommands on `app`; the returned object owns their option values.
TraceCommands* add_trace_commands(CLI::App& app);
// Runs the parsed trace subcommand; returns the exit status, or -1 when no trace command was given.
// Input errors propagate as InputError (the caller prints them and exits 2).
int run_trace_command(TraceCommands& c, int argc, char** argv);

}  // namespace kvsim
