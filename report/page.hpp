// The report page: one self-contained HTML file (Plotly inlined, the data block, the page's script),
// which opens from disk with no network and no server.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

namespace kvsim::report {

// The id of the <script type="application/json"> element that holds the data block.
inline constexpr const char* kDataElementId = "kvsim-data";

// The page for `data` (report_data's block), with `plotly_js` inlined.
std::string render_page(const nlohmann::json& data, const std::string& plotly_js);

}  // namespace kvsim::report
