// `kvsim report`: one self-contained HTML page (Plotly inlined, opens offline) from the outputs of
// plan, sweep, serve and replay, or from a scenario it runs itself (report/report.hpp, docs/report.md).
#pragma once
#include <CLI/CLI.hpp>

namespace kvsim {

struct ReportCommand;
ReportCommand* add_report_command(CLI::App& app);
// The exit status, or -1 when the subcommand was not given. Input errors propagate as InputError.
int run_report_command(ReportCommand& c);

}  // namespace kvsim
