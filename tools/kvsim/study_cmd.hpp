// `kvsim study query-similarity|topk-overlap|layer-jaccard TRACE`: tests of the seed papers' premises
// on a trace (replay/studies.hpp, docs/findings.md).
#pragma once
#include <CLI/CLI.hpp>

namespace kvsim {
struct StudyCommand;
StudyCommand* add_study_command(CLI::App& app);
// Runs it when parsed; returns the exit status, or -1 when `study` was not given.
int run_study_command(StudyCommand& c);
}  // namespace kvsim
