// `kvsim plan SCENARIO --target-tpot MS | --target-throughput TOK_S [--min-recall X] [--max-output-error X]
// [--trace TRACE]`: per policy the best budget and batch that meet the target (docs/planning.md).
#pragma once
#include <CLI/CLI.hpp>
#include <string>

#include "model/scenario.hpp"

namespace kvsim {

struct TargetOptions;
// Adds the target options to the `plan` subcommand; the returned object owns their values.
TargetOptions* add_target_options(CLI::App& plan);
bool target_requested(const TargetOptions& t);
// Answers for every policy and context of `s`; `format` is table or json, `out` a file or "" (stdout).
int run_target_plan(const TargetOptions& t, const Scenario& s, const std::string& format, const std::string& out);

}  // namespace kvsim
