#include "report/plotly_js.hpp"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.hpp"

namespace kvsim::report {

std::string plotly_js_path() {
  if (const char* env = std::getenv(kPlotlyVariable); env && *env) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(env, ec))
      throw_input_error("environment", 0, kPlotlyVariable,
                        std::string("value '") + env + "' is not a readable file; allowed: the path of plotly.js or plotly.min.js");
    return env;
  }
  std::error_code ec;
  if (std::filesystem::is_regular_file(kDebianPlotlyPath, ec)) return kDebianPlotlyPath;
  throw_input_error("environment", 0, kPlotlyVariable,
                    std::string("unset, and ") + kDebianPlotlyPath +
                        " is missing; allowed: install Debian's python3-plotly (apt-get install python3-plotly, or "
                        "tools/install-deps.sh), or set KVSIM_PLOTLY_JS to a plotly.js or plotly.min.js file");
}

std::string plotly_js() {
  const std::string path = plotly_js_path();
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string js = ss.str();
  if (js.find("Plotly") == std::string::npos)
    throw_input_error(path, 0, kPlotlyVariable, "does not read as Plotly.js; allowed: plotly.js or plotly.min.js");
  // Inline in <script>: a "</script" inside the library would end the element early.
  for (size_t at = js.find("</script"); at != std::string::npos; at = js.find("</script", at + 2)) js.replace(at, 2, "<\\/");
  return js;
}

}  // namespace kvsim::report
