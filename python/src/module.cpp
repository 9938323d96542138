// kvsim's library functions for Python (the `kvsim._kvsim` extension; python/kvsim/__init__.py is the
// API users import). Each function calls the same library code the CLI calls -- no subprocess, no
// argument strings -- and returns JSON or CSV text, which the Python layer turns into dicts and pandas
// DataFrames with the CSV's column names. Every function releases the GIL while it runs. Input errors
// become kvsim._kvsim.InputError carrying the file, line, field and message (docs/python.md).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/yaml_reader.hpp"
#include "model/library.hpp"
#include "model/plan.hpp"
#include "model/report.hpp"
#include "model/reproduction.hpp"
#include "model/scenario.hpp"
#include "policies/registry.hpp"
#include "serve/capacity.hpp"
#include "serve/serve.hpp"
#include "sweep/pareto.hpp"
#include "sweep/quality.hpp"
#include "sweep/result_store.hpp"
#include "sweep/runner.hpp"
#include "sweep/spec.hpp"
#include "sweep/target_plan.hpp"
#include "traces/format/profile.hpp"
#include "traces/format/trace_file.hpp"
#include "traces/format/trace_info.hpp"
#include "replay/session.hpp"
#include "report/report.hpp"
#include "core/atomic_file.hpp"

namespace py = pybind11;
using json = nlohmann::json;

namespace kvsim {
namespace {

// A scenario from YAML text (a file's contents, or a dict the Python side dumped as JSON, which is YAML
// too); `name` is what errors call it (the file's path, or "<dict>").
Scenario scenario_from(const std::string& text, const std::string& name, const std::vector<std::string>& policies,
                       const std::vector<std::string>& sets) {
  Overrides o;
  o.policies = policies;
  o.sets = sets;
  return load_scenario(load_yaml_string(text, name), name, policy_catalog(), o);
}

// (JSON, CSV) of `kvsim plan`.
std::pair<std::string, std::string> plan(const std::string& text, const std::string& name,
                                         const std::vector<std::string>& policies, const std::vector<std::string>& sets) {
  const Scenario s = scenario_from(text, name, policies, sets);
  const Deployment d = make_deployment(s);
  const std::vector<PlanResult> r = plan_scenario(s, d, *find_policy("full"));
  return {plan_json(s, r).dump(), plan_csv(s, r)};
}

// `kvsim plan --target-tpot MS` / `--target-throughput X` without a quality floor: per policy and
// context the batch with the most throughput at TPOT <= target (or the lowest TPOT at >= throughput).
// A quality floor's pieces: the target with its floor, and the trace replays behind it (none without a trace).
struct Floor {
  std::optional<double> min_recall, max_error;
  std::unique_ptr<sweep::QualityCache> cache;
  sweep::QualityFn fn;
  bool any() const { return min_recall || max_error; }
};
Floor floor_of(const std::string& trace, double min_recall, double max_error, const char* who) {
  Floor f;
  if (min_recall >= 0) f.min_recall = min_recall;
  if (max_error >= 0) f.max_error = max_error;
  if (f.any() && trace.empty())
    throw_input_error(who, 0, "trace", "a quality floor (min_recall, max_output_error) needs a trace to replay");
  if (!trace.empty() && !std::filesystem::exists(trace))
    throw_input_error(who, 0, "trace", "file '" + trace + "' does not exist");
  sweep::TraceSettings ts;
  ts.path = trace;
  f.cache = std::make_unique<sweep::QualityCache>(ts);
  f.fn = sweep::quality_from_trace(*f.cache, "trace");
  return f;
}

std::string target_plan(const std::string& text, const std::string& name, const std::vector<std::string>& policies,
                        const std::vector<std::string>& sets, double tpot_ms, double throughput,
                        const std::string& trace, double min_recall, double max_error) {
  if ((tpot_ms > 0) == (throughput > 0))
    throw_input_error("target_plan", 0, "tpot_ms", "give exactly one of tpot_ms and throughput (both > 0)");
  const Scenario s = scenario_from(text, name, policies, sets);
  const Floor floor = floor_of(trace, min_recall, max_error, "target_plan");
  sweep::TargetPlanRequest r;  // the CLI's request (sweep/target_plan.hpp), its answers as flat dicts
  r.target.kind = tpot_ms > 0 ? sweep::Target::Kind::tpot : sweep::Target::Kind::throughput;
  r.target.value = tpot_ms > 0 ? tpot_ms * 1e-3 : throughput;
  r.target.min_recall = floor.min_recall;
  r.target.max_error = floor.max_error;
  if (!trace.empty()) r.quality = &floor.fn;
  r.trace = trace;
  json out = json::array();
  for (const sweep::TargetPlanEntry& an : sweep::plan_targets(s, r)) {
    const sweep::TargetAnswer& a = an.answer;
    json e = {{"policy", std::string(a.policy->name())}, {"context_tokens", an.context}, {"feasible", a.feasible}};
    if (a.feasible) {
      e["params"] = params_json(*a.policy, a.params);
      e["batch"] = a.batch;
      e["tpot_s"] = a.estimate.tpot_s;
      e["throughput_tok_s"] = a.estimate.throughput_tok_s;
      e["binding"] = a.binding;
      if (a.quality)
        e["quality"] = {{"recall", a.quality->recall},
                        {"output_error", a.quality->error ? json(*a.quality->error) : json(nullptr)}};
    } else {
      e["failure"] = a.failure;
    }
    out.push_back(e);
  }
  return out.dump();
}

// `kvsim sweep`, or shard `index` of `count`: the results CSV text (rows in point order).
std::string sweep_run(const std::string& text, const std::string& name, int64_t index, int64_t count, int threads,
                      const std::string& scratch_dir) {
  const sweep::SweepSpec spec = sweep::load_sweep(load_yaml_string(text, name), name);
  sweep::RunOptions o;
  o.shard.index = uint64_t(index);
  o.shard.count = uint64_t(count);
  o.threads = threads;
  // The runner writes a results file (resumable, atomic); the text is read back from it.
  std::random_device rd;
  const std::filesystem::path dir =
      scratch_dir.empty() ? std::filesystem::temp_directory_path() : std::filesystem::path(scratch_dir);
  const std::string path = (dir / ("kvsim-sweep-" + std::to_string(rd()) + "-" + std::to_string(index) + ".csv")).string();
  sweep::run_sweep(spec, path, o);
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::error_code ec;
  std::filesystem::remove(path, ec);
  std::filesystem::remove(sweep::pareto_path(path), ec);
  return ss.str();
}

// Shards' results texts merged back into the single-process file's rows and order.
std::string sweep_merge(const std::vector<std::string>& texts, const std::string& scratch_dir) {
  std::random_device rd;
  const std::filesystem::path dir =
      scratch_dir.empty() ? std::filesystem::temp_directory_path() : std::filesystem::path(scratch_dir);
  std::vector<std::string> paths;
  for (size_t i = 0; i < texts.size(); ++i) {
    paths.push_back((dir / ("kvsim-merge-" + std::to_string(rd()) + "-" + std::to_string(i) + ".csv")).string());
    std::ofstream(paths.back()) << texts[i];
  }
  std::string merged;
  try {
    merged = sweep::merge_results(paths);
  } catch (...) {
    for (const auto& p : paths) std::filesystem::remove(p);
    throw;
  }
  for (const auto& p : paths) std::filesystem::remove(p);
  return merged;
}

struct ServeArgs {
  double rate = 0;
  int64_t requests = 0;
  int replicas = 0;
};

serve::ServingSpec serving_of(const Scenario& s, const ServeArgs& a, std::vector<serve::Request>& requests) {
  serve::ServingSpec spec = serve::read_serving(s);
  if (a.rate > 0) spec.workload.arrivals.rate = a.rate;
  if (a.requests > 0) {
    spec.workload.requests = a.requests;
    spec.workload.duration_s = 0;
  }
  if (a.replicas > 0) spec.replicas = a.replicas;
  requests = serve::make_requests(spec.workload, s.model.max_context);
  return spec;
}

// `kvsim serve`: (summary JSON, per-request CSV).
std::pair<std::string, std::string> serve_run(const std::string& text, const std::string& name,
                                              const std::vector<std::string>& policies,
                                              const std::vector<std::string>& sets, double rate, int64_t requests,
                                              int replicas) {
  const Scenario s = scenario_from(text, name, policies, sets);
  std::vector<serve::Request> reqs;
  const serve::ServingSpec spec = serving_of(s, {rate, requests, replicas}, reqs);
  const Deployment d = make_deployment(s);
  std::vector<serve::ServeResult> results;
  json j = {{"scenario", name}, {"requests", reqs.size()}, {"policies", json::array()}};
  for (const PolicyChoice& pc : s.policies) {
    results.push_back(serve::run_serving(d, *pc.policy, pc.params, spec, reqs, false));
    j["policies"].push_back(serve::summary_json(results.back(), spec));
  }
  return {j.dump(), serve::requests_csv(results)};
}

// `kvsim capacity` (no quality floor): JSON.
std::string capacity(const std::string& text, const std::string& name, const std::vector<std::string>& policies,
                     const std::vector<std::string>& sets, double rate, int64_t requests, double slo_ttft_p99_s,
                     double slo_tpot_p99_s, int max_gpus, const std::vector<int>& tp, const std::string& trace,
                     double min_recall, double max_error) {
  if (slo_ttft_p99_s <= 0 && slo_tpot_p99_s <= 0)
    throw_input_error("capacity", 0, "slo_ttft_p99_s", "give slo_ttft_p99_s and/or slo_tpot_p99_s (seconds, > 0)");
  const Scenario s = scenario_from(text, name, policies, sets);
  for (int t : tp)
    if (!s.model.splits_over(t))
      throw_input_error("capacity", 0, "tensor_parallel", "value " + std::to_string(t) + " does not split model " +
                                                              s.model.name + " (query heads, FFN width, KV heads)");
  std::vector<serve::Request> reqs;
  const serve::ServingSpec spec = serving_of(s, {rate, requests, 0}, reqs);
  serve::CapacityQuery q;
  q.slo_ttft_p99_s = slo_ttft_p99_s;
  q.slo_tpot_p99_s = slo_tpot_p99_s;
  q.max_gpus = max_gpus;
  q.tensor_parallel = tp;
  const Floor floor = floor_of(trace, min_recall, max_error, "capacity");
  q.min_recall = floor.min_recall;
  q.max_error = floor.max_error;
  json out = json::array();
  for (const PolicyChoice& pc : s.policies)
    out.push_back(serve::capacity_json(serve::find_capacity(s, pc, spec, reqs, q, q.has_quality() ? &floor.fn : nullptr),
                                       q.has_quality()));
  return out.dump();
}

// `kvsim replay`: (JSON, CSV).
std::pair<std::string, std::string> replay_run(const std::string& trace, const std::string& scenario_path,
                                               const std::vector<std::string>& policies,
                                               const std::vector<std::string>& sets, int64_t max_steps, int threads) {
  replay::ReplayRequest rq;
  rq.trace = trace;
  rq.scenario = scenario_path;
  rq.policies = policies;
  rq.sets = sets;
  rq.max_steps = max_steps;
  rq.threads = threads;
  const auto report = replay::run_replay_request(rq);
  return {replay::replay_report_text(*report, "json"), replay::replay_report_text(*report, "csv")};
}

// `kvsim reproduce [PAPER]`: one row per published figure.
std::string reproduce_rows(const std::string& paper) {
  std::vector<std::string> names = paper.empty() ? paper_names() : std::vector<std::string>{paper};
  json out = json::array();
  for (const std::string& p : names)
    for (const std::string& file : paper_scenarios(p)) {
      const Reproduction r = load_reproduction_file(file, policy_catalog());
      for (const ReproRow& row : kvsim::reproduce(r)) {
        const PublishedFigure& f = *row.figure;
        out.push_back({{"paper", r.paper}, {"file", r.file}, {"source", f.source}, {"label", f.label},
                       {"policy", f.policy}, {"metric", to_string(f.metric)}, {"context_tokens", f.context},
                       {"batch", f.batch}, {"unit", f.unit}, {"published", f.oom ? json(nullptr) : json(f.value)},
                       {"published_oom", f.oom},
                       {"predicted", row.predicted_oom ? json(nullptr) : json(row.predicted)},
                       {"predicted_oom", row.predicted_oom}, {"relative_error", row.relative_error},
                       {"exact", f.exact}, {"matches_exactly", row.matches_exactly}, {"approximate", f.approximate},
                       {"comparable", f.comparable}});
      }
    }
  return out.dump();
}

std::string trace_info(const std::string& path, bool profile) {
  auto t = TraceFile::open(path);
  TraceProfile prof;
  if (profile) prof = profile_trace(*t);
  return info_json(path, *t, profile ? &prof : nullptr).dump();
}

// kvsim.report: the page for `sources` ({kind: (name, text)}, kinds as report::ReportInputs names them)
// and, when `scenario_text` is not empty, the scenario's own plan and serve; written to `out` atomically
// when it is not empty.
std::string report_page(const std::map<std::string, std::pair<std::string, std::string>>& sources,
                        const std::string& scenario_text, const std::string& scenario_name, const std::string& out) {
  report::ReportInputs in;
  if (!scenario_text.empty()) in = report::run_scenario(scenario_from(scenario_text, scenario_name, {}, {}));
  const std::map<std::string, std::optional<report::Source>*> slots = {
      {"plan", &in.plan},         {"sweep", &in.sweep},       {"pareto", &in.pareto}, {"serve", &in.serve},
      {"requests", &in.requests}, {"series", &in.series}, {"replay", &in.replay}};
  for (const auto& [kind, source] : sources) {
    const auto slot = slots.find(kind);
    if (slot == slots.end()) throw_input_error("report", 0, kind, "unknown input; allowed: plan, sweep, pareto, serve, requests, series, replay");
    *slot->second = report::Source{source.first, source.second};
  }
  const std::string html = report::render_report(in);
  if (!out.empty()) write_file_atomic(out, html);
  return html;
}

}  // namespace
}  // namespace kvsim

PYBIND11_MODULE(_kvsim, m) {
  using namespace kvsim;
  m.doc() = "kvsim's C++ library (use the `kvsim` package: python/kvsim/__init__.py)";
  static py::exception<InputError> input_error(m, "InputError", PyExc_ValueError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const InputError& e) {
      // (message as printed, file, line, field, message without the location)
      py::tuple args = py::make_tuple(e.what(), e.file, e.line, e.field, e.message.empty() ? e.what() : e.message);
      PyErr_SetObject(input_error.ptr(), args.ptr());
    }
  });
  const auto nogil = py::call_guard<py::gil_scoped_release>();
  m.def("library_dir", &library_dir);
  m.def("plan", &plan, nogil);
  m.def("target_plan", &target_plan, nogil);
  m.def("sweep_run", &sweep_run, nogil);
  m.def("sweep_merge", &sweep_merge, nogil);
  m.def("serve", &serve_run, nogil);
  m.def("capacity", &capacity, nogil);
  m.def("replay", &replay_run, nogil);
  m.def("reproduce", &reproduce_rows, nogil);
  m.def("trace_info", &trace_info, nogil);
  m.def("report", &report_page, nogil);
  // For the tests: whether a function registered with the same guard runs holding the GIL (it must not).
  m.def("_gil_held_inside", [] { return PyGILState_Check() != 0; }, nogil);
}
