// The report page's own script: it reads the data block (report_data.hpp) and draws every chart with
// Plotly. No numbers are computed in C++ for the charts, so what the page shows is the data block.
#pragma once

namespace kvsim::report {
extern const char* const kPageScript;
}  // namespace kvsim::report
