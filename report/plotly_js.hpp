// Plotly.js, the charting library every report embeds (inline, so the page opens offline). It is read
// at run time, not compiled in: the library is 8.7 MB of JavaScript that every kvsim binary, the tests'
// second CLI and the Python module would otherwise carry, and Debian keeps it up to date in
// python3-plotly (tools/install-deps.sh installs it).
#pragma once
#include <string>

namespace kvsim::report {

// Where the library is looked for, in order: $KVSIM_PLOTLY_JS (when set, it must name a readable
// file), then Debian's python3-plotly copy.
inline constexpr const char* kPlotlyVariable = "KVSIM_PLOTLY_JS";
inline constexpr const char* kDebianPlotlyPath = "/usr/share/python3-plotly/plotly.js";

// The path in force, or an InputError saying what to install or set.
std::string plotly_js_path();
// Its text, ready to inline in a <script> element.
std::string plotly_js();

}  // namespace kvsim::report
