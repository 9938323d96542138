// `kvsim report` and Python's kvsim.report: one self-contained HTML page from the outputs of plan,
// sweep, serve and replay, or from a scenario it runs itself. docs/report.md says what the page shows.
#pragma once
#include <string>

#include "model/scenario.hpp"
#include "report/sources.hpp"

namespace kvsim::report {

// The page for `in` (InputError, naming file, field, value and what is allowed, for a bad input; and
// when Plotly.js cannot be found, what to install).
std::string render_report(const ReportInputs& in);

// Runs scenario `s` the way `kvsim plan --format json` does, and, when it has a `serving:` block, the
// way `kvsim serve --format json --requests-csv --series` does too; the outputs as a report's inputs.
ReportInputs run_scenario(const Scenario& s);

}  // namespace kvsim::report
