#include "report/report_data.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "report/checks.hpp"
#include "report/warnings.hpp"

namespace kvsim::report {

using json = nlohmann::json;

namespace {

// The columns the page reads from each CSV (the files' own headers carry more).
const std::vector<std::string> kSweepColumns = {"point", "policy", "feasible", "batch", "tpot_s", "throughput_tok_s"};
const std::vector<std::string> kParetoColumns = {"front", "point", "policy", "feasible", "tpot_s", "throughput_tok_s"};
const std::vector<std::string> kRequestColumns = {"policy", "ttft_s", "tpot_s", "e2e_s"};
const std::vector<std::string> kSeriesColumns = {"policy", "replica", "start_s", "running", "waiting"};

// The per-iteration series as the page draws it: the columns of the queue and batch charts, and only
// the iterations where a (policy, replica)'s running or waiting count changes, plus its last one. The
// charts are step functions of those counts, so they are drawn exactly; a 2,000-request run has
// ~100,000 iterations, most of them decode steps that change neither count.
json queue_changes(const json& series) {
  const std::vector<std::string> keep = {"policy", "replica", "start_s", "running", "waiting"};
  const auto cols = series["columns"].get<std::vector<std::string>>();
  std::vector<size_t> at;
  for (const std::string& k : keep) at.push_back(size_t(std::find(cols.begin(), cols.end(), k) - cols.begin()));
  const json& rows = series["rows"];
  json out = json::array();
  for (size_t i = 0; i < rows.size(); ++i) {
    const json& r = rows[i];
    const bool same_line = i > 0 && rows[i - 1][at[0]] == r[at[0]] && rows[i - 1][at[1]] == r[at[1]];
    const bool next_line = i + 1 == rows.size() || rows[i + 1][at[0]] != r[at[0]] || rows[i + 1][at[1]] != r[at[1]];
    const bool changed = !same_line || rows[i - 1][at[3]] != r[at[3]] || rows[i - 1][at[4]] != r[at[4]];
    if (!changed && !next_line) continue;
    json row = json::array();
    for (size_t c : at) row.push_back(r[c]);
    out.push_back(std::move(row));
  }
  return {{"file", series["file"]}, {"columns", keep}, {"rows", std::move(out)}, {"iterations", rows.size()}};
}

}  // namespace

json report_data(const ReportInputs& in) {
  if (!in.plan && !in.sweep && !in.pareto && !in.serve && !in.requests && !in.series && !in.replay)
    throw_input_error("command line", 0, "(inputs)",
                      "nothing to report; allowed: --plan, --sweep (with --pareto), --serve (with --requests, --series), "
                      "--replay or --scenario");
  if (in.pareto && !in.sweep)
    throw_input_error("command line", 0, "--pareto", "a Pareto file needs its results file; give --sweep too");
  if ((in.requests || in.series) && !in.serve)
    throw_input_error("command line", 0, in.requests ? "--requests" : "--series",
                      "a per-request or per-iteration file needs its summary; give --serve too");
  json d = {{"schema", "kvsim.report/1"}, {"sources", json::object()}, {"warnings", json::array()}};
  for (const char* k : {"plan", "sweep", "pareto", "serve", "requests", "series", "replay"}) d[k] = nullptr;
  auto source = [&](const char* kind, const std::optional<Source>& s) {
    if (s) d["sources"][kind] = s->name;
  };
  source("plan", in.plan);
  source("sweep", in.sweep);
  source("pareto", in.pareto);
  source("serve", in.serve);
  source("requests", in.requests);
  source("series", in.series);
  source("replay", in.replay);
  if (in.plan) {
    d["plan"] = parse_json_source(*in.plan, "kvsim.plan/1");
    check_plan(d["plan"], in.plan->name);
    plan_warnings(d["plan"], d["warnings"]);
  }
  if (in.sweep) {
    d["sweep"] = parse_csv_source(*in.sweep, kSweepColumns);
    sweep_warnings(d["sweep"], d["warnings"]);
  }
  if (in.pareto) d["pareto"] = parse_csv_source(*in.pareto, kParetoColumns);
  if (in.serve) {
    d["serve"] = parse_json_source(*in.serve, "");
    check_serve(d["serve"], in.serve->name);
    serve_warnings(d["serve"], d["warnings"]);
  }
  if (in.requests) d["requests"] = parse_csv_source(*in.requests, kRequestColumns);
  if (in.series) d["series"] = queue_changes(parse_csv_source(*in.series, kSeriesColumns));
  if (in.replay) {
    d["replay"] = parse_json_source(*in.replay, "kvsim.replay/1");
    check_replay(d["replay"], in.replay->name);
    replay_warnings(d["replay"], d["warnings"]);
  }
  return d;
}

}  // namespace kvsim::report
