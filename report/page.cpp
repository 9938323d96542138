#include "report/page.hpp"

#include <algorithm>

#include "report/checks.hpp"
#include "report/page_script.hpp"
#include "report/tables.hpp"

namespace kvsim::report {

using json = nlohmann::json;

namespace {

const char* const kStyle = R"CSS(
body { font-family: system-ui, sans-serif; margin: 1.5em auto; max-width: 1300px; color: #222; }
h1 { margin-bottom: 0.2em; } h2 { margin-top: 1.6em; border-bottom: 1px solid #ddd; }
p.sources { color: #666; margin-top: 0; }
table { border-collapse: collapse; font-size: 0.85em; margin: 0.6em 0; }
th, td { border: 1px solid #ddd; padding: 2px 6px; text-align: right; white-space: nowrap; }
th { background: #f4f4f4; } td:nth-child(-n+2) { text-align: left; }
tr.under td { text-align: left; color: #555; padding-left: 3em; border-top: none; font-size: 0.95em; }
ul.warnings { font-size: 0.9em; padding-left: 1.2em; }
details { max-height: 360px; overflow: auto; border: 1px solid #eee; padding: 0.3em 0.6em; }
li.warning { margin: 0.2em 0; } li.calibration { color: #0b4f8a; } li.extrapolated, li.unmeasured { color: #8a5a00; }
li.infeasible, li.overloaded, li.rejected { color: #a00; }
div.chart { width: 100%; height: 460px; }
div.scroll { max-height: 420px; overflow: auto; }
)CSS";

// The data block inside <script type="application/json">: every '<' (only ever inside a JSON string)
// written as \u003c, so no text in any input can close the element or open a comment.
std::string data_block(const json& data) {
  const std::string dumped = data.dump(-1, ' ', false, json::error_handler_t::replace);
  std::string out;
  out.reserve(dumped.size() + 64);
  for (char c : dumped) {
    if (c == '<') out += "\\u003c";
    else out += c;
  }
  return out;
}

std::string chart(const std::string& id) { return "<div class=\"chart\" id=\"" + id + "\"></div>\n"; }

std::string plan_section(const json& plan) {
  std::string t = "<section id=\"plan\"><h2>Plan: " + html_escape(text_or(plan, "model", "?")) + " on " +
                  html_escape(text_or(plan, "hardware", "?")) + " (host " +
                  html_escape(text_or(plan, "host", "?")) + "), calibration " +
                  html_escape(plan["calibration"]["name"].get<std::string>()) + "</h2>\n";
  t += "<div class=\"scroll\">" + plan_table(plan) + "</div>\n";
  for (const char* id : {"chart-tpot", "chart-throughput", "chart-memory-hbm", "chart-memory-dram", "chart-phases"}) t += chart(id);
  return t + "</section>\n";
}

std::string sweep_section(const json& data) {
  const json& sweep = data["sweep"];
  int feasible = 0;
  const auto& cols = sweep["columns"];
  const size_t f = size_t(std::find(cols.begin(), cols.end(), "feasible") - cols.begin());
  for (const json& r : sweep["rows"])
    if (r[f] == 1) ++feasible;
  std::string t = "<section id=\"sweep\"><h2>Sweep: " + html_escape(sweep["file"].get<std::string>()) + "</h2>\n<p>" +
                  std::to_string(sweep["rows"].size()) + " points, " + std::to_string(feasible) + " feasible.</p>\n";
  if (data["plan"].is_null()) t += chart("chart-sweep-tpot") + chart("chart-sweep-throughput");
  if (!data["pareto"].is_null()) {
    t += "<h3>Pareto points (" + html_escape(data["pareto"]["file"].get<std::string>()) + ")</h3>\n";
    t += "<div class=\"scroll\">" + pareto_table(data["pareto"]) + "</div>\n<div id=\"chart-pareto\"></div>\n";
  }
  return t + "</section>\n";
}

std::string serve_section(const json& data) {
  const json& serve = data["serve"];
  std::string t = "<section id=\"serve\"><h2>Serving: " +
                  html_escape(serve.contains("scenario") && serve["scenario"].is_string() ? serve["scenario"].get<std::string>()
                                                                                         : data["sources"]["serve"].get<std::string>()) +
                  "</h2>\n" + serve_table(serve);
  if (!data["requests"].is_null()) t += chart("chart-cdf-ttft") + chart("chart-cdf-tpot");
  if (!data["series"].is_null()) t += chart("chart-queue") + chart("chart-batch");
  return t + "</section>\n";
}

std::string replay_section(const json& replay) {
  const json& tr = replay["trace"];
  std::string t = "<section id=\"replay\"><h2>Replay: " + html_escape(text_or(tr, "path", "?")) + " (" +
                  html_escape(text_or(tr, "model", "?")) + ")</h2>\n";
  t += "<div class=\"scroll\">" + replay_table(replay) + "</div>\n" + chart("chart-replay");
  return t + "</section>\n";
}

}  // namespace

std::string render_page(const json& data, const std::string& plotly_js) {
  std::string sources;
  for (auto it = data["sources"].begin(); it != data["sources"].end(); ++it)
    sources += (sources.empty() ? "" : ", ") + it.key() + " " + html_escape(it.value().get<std::string>());
  std::string h = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>kvsim report</title>\n<style>";
  h += kStyle;
  h += "</style>\n<script>\n" + plotly_js + "\n</script>\n</head>\n<body>\n<h1>kvsim report</h1>\n<p class=\"sources\">from " +
       sources + "</p>\n";
  h += "<section id=\"warnings\"><h2>Calibration and warnings</h2>\n" + warnings_list(data["warnings"]) + "</section>\n";
  if (!data["plan"].is_null()) h += plan_section(data["plan"]);
  if (!data["sweep"].is_null()) h += sweep_section(data);
  if (!data["serve"].is_null()) h += serve_section(data);
  if (!data["replay"].is_null()) h += replay_section(data["replay"]);
  h += "<script type=\"application/json\" id=\"" + std::string(kDataElementId) + "\">" + data_block(data) + "</script>\n";
  h += "<script>" + std::string(kPageScript) + "</script>\n</body></html>\n";
  return h;
}

}  // namespace kvsim::report
