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

#include "core/dtype.hpp"
#include "core/error.hpp"
#include "core/error_parts.hpp"
#include "core/yaml_reader.hpp"
#include "model/library.hpp"
#include "model/library_json.hpp"
#include "model/plan.hpp"
#include "model/report.hpp"
#include "model/reproduction.hpp"
#include "model/scenario.hpp"
#include "policies/registry.hpp"
#include "serve/capacity.hpp"
#include "serve/step_range.hpp"
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

// A function's keyword arguments: name -> the value as YAML (the Python side writes JSON, which is
// YAML). They are read with the library's YamlMap against the CLI's ranges and choices, so a bad value
// gets the checks and the message (field, value, allowed) a scenario field or a CLI option gets; a
// keyword nobody read is an unknown key with the allowed ones listed.
using Keywords = std::map<std::string, std::string>;

YamlMap keyword_map(const Keywords& kw, const std::string& who) {
  YAML::Node n(YAML::NodeType::Map);
  for (const auto& [k, v] : kw) n[k] = load_yaml_string(v, who);
  return YamlMap(n, who, "", false);
}

// A library name or path keyword (hardware, host, model, calibration) as the CLI option takes it.
std::optional<std::string> name_keyword(YamlMap& m, const std::string& key) {
  if (!m.has(key)) return std::nullopt;
  return m.string(key);
}

// A keyword the CLI takes as one value (output, batch, tensor_parallel, a dtype): a list or a mapping is
// refused here, naming the keyword, instead of reaching the scenario's check as an empty value.
std::string scalar_keyword(YamlMap& m, const std::string& key) {
  const YAML::Node n = m.node(key);
  if (!n.IsScalar())
    m.fail(key, std::string("value is a ") + (n.IsSequence() ? "list" : "mapping") + "; allowed: one value");
  return n.Scalar();
}

// The scenario overrides among the keywords (`keys`: the ones the CLI subcommand has), as the CLI sets
// them: context N or a list (the CLI's N1,N2,...), output, batch N or max.
Overrides overrides_of(YamlMap& m, const std::vector<std::string>& keys, const std::vector<std::string>& policies,
                       const std::vector<std::string>& sets) {
  Overrides o;
  o.origin = m.file();  // "kvsim.plan", "kvsim.serve", ...: the function, as its other errors name it
  o.policies = policies;
  o.sets = sets;
  for (const std::string& k : keys) {
    if (!m.has(k)) continue;
    if (k == "hardware") o.hardware = name_keyword(m, k);
    else if (k == "host") o.host = name_keyword(m, k);
    else if (k == "model") o.model = name_keyword(m, k);
    else if (k == "calibration") o.calibration = name_keyword(m, k);
    else if (k == "context") {
      const YAML::Node n = m.node(k);
      std::string text;
      for (const YAML::Node& item : n.IsSequence() ? n : YAML::Node(std::vector<YAML::Node>{n}))
        text += (text.empty() ? "" : ", ") + (item.IsScalar() ? item.Scalar() : std::string("(not a scalar)"));
      o.context = n.IsSequence() ? "[" + text + "]" : text;
    } else if (k == "output") o.output = scalar_keyword(m, k);
    else if (k == "batch") o.batch = scalar_keyword(m, k);
    else if (k == "tensor_parallel") o.tensor_parallel = scalar_keyword(m, k);
    else if (k == "weight_dtype") o.weight_dtype = scalar_keyword(m, k);
    else if (k == "kv_dtype") o.kv_dtype = scalar_keyword(m, k);
  }
  return o;
}

const std::vector<std::string> kPlanKeys = {"hardware", "host",   "model",          "calibration", "context",
                                            "output",   "batch", "tensor_parallel", "weight_dtype", "kv_dtype"};
const std::vector<std::string> kServeKeys = {"hardware", "model", "calibration"};

// A scenario from YAML text (a file's contents, or a dict the Python side dumped as JSON, which is YAML
// too); `name` is what errors call it (the file's path, or "<dict>").
Scenario scenario_from(const std::string& text, const std::string& name, const Overrides& o) {
  return load_scenario(load_yaml_string(text, name), name, policy_catalog(), o);
}

// (JSON, CSV) of `kvsim plan`.
std::pair<std::string, std::string> plan(const std::string& text, const std::string& name,
                                         const std::vector<std::string>& policies, const std::vector<std::string>& sets,
                                         const Keywords& kw) {
  YamlMap m = keyword_map(kw, "kvsim.plan");
  const Overrides o = overrides_of(m, kPlanKeys, policies, sets);
  m.finish();
  const Scenario s = scenario_from(text, name, o);
  const Deployment d = make_deployment(s);
  const std::vector<PlanResult> r = plan_scenario(s, d, *find_policy("full"));
  return {plan_json(s, r).dump(), plan_csv(s, r)};
}

// A quality floor's pieces: the target with its floor, and the trace replays behind it (none without a trace).
struct Floor {
  std::optional<double> min_recall, max_error;
  std::unique_ptr<sweep::QualityCache> cache;
  sweep::QualityFn fn;
  bool any() const { return min_recall || max_error; }
};
// The CLI's --min-recall (0 .. 1), --max-output-error (>= 0) and --trace.
Floor floor_of(YamlMap& m, const char* who, std::string& trace) {
  Floor f;
  if (m.has("min_recall")) f.min_recall = m.number("min_recall", Range::between(0, 1));
  if (m.has("max_output_error")) f.max_error = m.number("max_output_error", Range::at_least(0));
  trace = m.has("trace") ? m.string("trace") : "";
  if (f.any() && trace.empty())
    throw_input_error(who, 0, "trace", "a quality floor (min_recall, max_output_error) needs a trace to replay");
  if (!trace.empty() && !std::filesystem::exists(trace))
    throw_input_error(who, 0, "trace", "file '" + trace + "' does not exist");
  sweep::TraceSettings ts;
  ts.path = trace;
  ts.max_steps = m.integer("trace_max_steps", Range::between(0, double(int64_t(1) << 40)), 0);  // --trace-max-steps
  ts.memory_limit_gib = m.number("trace_memory_limit", Range::positive(), 8);                   // --trace-memory-limit
  f.cache = std::make_unique<sweep::QualityCache>(ts);
  if (m.has("quality_cache")) f.cache->use_file(m.string("quality_cache"));                     // --quality-cache
  f.fn = sweep::quality_from_trace(*f.cache, "trace");
  return f;
}

json target_entry_json(const sweep::TargetPlanEntry& an) {
  const sweep::TargetAnswer& a = an.answer;
  json e = {{"policy", std::string(a.policy->name())}, {"context_tokens", an.context}, {"feasible", a.feasible}};
  if (!a.feasible) {
    e["failure"] = a.failure;
    return e;
  }
  e["params"] = params_json(*a.policy, a.params);
  e["batch"] = a.batch;
  e["tpot_s"] = a.estimate.tpot_s;
  e["throughput_tok_s"] = a.estimate.throughput_tok_s;
  e["binding"] = a.binding;
  if (a.quality)
    e["quality"] = {{"recall", a.quality->recall},
                    {"output_error", a.quality->error ? json(*a.quality->error) : json(nullptr)}};
  return e;
}

// `kvsim plan --target-tpot MS` / `--target-throughput X`: per policy and context the budget and batch
// that meet the target best (sweep/target_plan.hpp, the CLI's request), as flat dicts.
std::string target_plan(const std::string& text, const std::string& name, const std::vector<std::string>& policies,
                        const std::vector<std::string>& sets, const Keywords& kw) {
  YamlMap m = keyword_map(kw, "kvsim.target_plan");
  const double tpot_ms = m.has("tpot_ms") ? m.number("tpot_ms", Range::positive()) : 0;
  const double throughput = m.has("throughput") ? m.number("throughput", Range::positive()) : 0;
  if ((tpot_ms > 0) == (throughput > 0))
    throw_input_error("kvsim.target_plan", 0, "tpot_ms", "give exactly one of tpot_ms and throughput (both > 0)");
  std::string trace;
  const Floor floor = floor_of(m, "kvsim.target_plan", trace);
  const Overrides o = overrides_of(m, kPlanKeys, policies, sets);
  const Scenario s = scenario_from(text, name, o);
  sweep::TargetPlanRequest r;
  r.target.kind = tpot_ms > 0 ? sweep::Target::Kind::tpot : sweep::Target::Kind::throughput;
  r.target.value = tpot_ms > 0 ? tpot_ms * 1e-3 : throughput;
  r.target.min_recall = floor.min_recall;
  r.target.max_error = floor.max_error;
  if (!trace.empty()) r.quality = &floor.fn;
  r.trace = trace;
  if (m.has("knob")) {  // --knob POLICY.PARAM=V1,V2,... (repeatable)
    const YAML::Node n = m.node("knob");
    for (const YAML::Node& item : n.IsSequence() ? n : YAML::Node(std::vector<YAML::Node>{n}))
      sweep::add_knob(item.Scalar(), policy_catalog(), r.knobs);
  }
  r.exhaustive = m.boolean("exhaustive", false);  // --exhaustive
  m.finish();
  json out = json::array();
  for (const sweep::TargetPlanEntry& an : sweep::plan_targets(s, r)) out.push_back(target_entry_json(an));
  return out.dump();
}

// `kvsim sweep`, or shard `index` of `count`: the results CSV text (rows in point order).
std::string sweep_run(const std::string& text, const std::string& name, int64_t index, int64_t count, int threads,
                      const std::string& scratch_dir) {
  const Range thread_range = Range::between(0, 4096);  // the CLI's --threads
  if (!thread_range.contains(threads))
    throw_input_error("kvsim.sweep", 0, "threads",
                      "value " + std::to_string(threads) + " is out of range; allowed: " + thread_range.describe());
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

// The serving options `kvsim serve` and `kvsim capacity` share (--rate, --requests, --router,
// --preemption), with their ranges, applied to the scenario's serving block as the CLI applies them.
serve::ServingSpec serving_of(const Scenario& s, YamlMap& m, const char* who, std::vector<serve::Request>& requests) {
  serve::ServingSpec spec = serve::read_serving(s);
  if (m.has("rate")) {
    if (spec.workload.arrivals.kind == serve::ArrivalSpec::Kind::trace)
      throw_input_error(who, 0, "rate", "the scenario's arrivals come from a trace file; use serving.time_scale");
    spec.workload.arrivals.rate = m.number("rate", Range::positive());
  }
  if (m.has("requests")) {
    spec.workload.requests = m.integer("requests", Range::between(1, 10'000'000));
    spec.workload.duration_s = 0;
  }
  if (m.has("replicas")) spec.replicas = int(m.integer("replicas", Range::between(1, 1'000'000)));
  if (m.has("concurrency")) spec.concurrency = m.integer("concurrency", Range::between(0, 10'000'000));
  if (m.has("router"))
    spec.router = m.choice("router", {"round_robin", "least_loaded"}) == "least_loaded" ? serve::Router::least_loaded
                                                                                          : serve::Router::round_robin;
  if (m.has("preemption"))
    spec.engine.preemption =
        m.choice("preemption", {"recompute", "swap"}) == "swap" ? serve::Preemption::swap : serve::Preemption::recompute;
  requests = serve::make_requests(spec.workload, s.model.max_context);
  return spec;
}

// `kvsim serve`: (summary JSON, per-request CSV).
std::pair<std::string, std::string> serve_run(const std::string& text, const std::string& name,
                                              const std::vector<std::string>& policies,
                                              const std::vector<std::string>& sets, const Keywords& kw) {
  YamlMap m = keyword_map(kw, "kvsim.serve");
  const Scenario s = scenario_from(text, name, overrides_of(m, kServeKeys, policies, sets));
  std::vector<serve::Request> reqs;
  const serve::ServingSpec spec = serving_of(s, m, "kvsim.serve", reqs);
  m.finish();
  const Deployment d = make_deployment(s);
  std::vector<serve::ServeResult> results;
  json j = {{"scenario", name}, {"requests", reqs.size()}, {"policies", json::array()}};
  for (const PolicyChoice& pc : s.policies) {
    serve::StepCosts costs(d, *pc.policy, pc.params, serve::max_prompt(reqs));
    results.push_back(serve::run_serving(costs, *pc.policy, spec, reqs, false));
    json p = serve::summary_json(results.back(), spec);
    p["range"] = serve::serve_range_json(serve::serve_range(costs, pc, spec, reqs));  // the run at its range's ends
    j["policies"].push_back(p);
  }
  return {j.dump(), serve::requests_csv(results)};
}

// capacity's search bounds: --slo-ttft-p99 / --slo-tpot-p99 (seconds), --max-gpus (1 .. 4096), --tp.
serve::CapacityQuery capacity_query(const Scenario& s, YamlMap& m) {
  serve::CapacityQuery q;
  if (m.has("slo_ttft_p99")) q.slo_ttft_p99_s = m.number("slo_ttft_p99", Range::positive());
  if (m.has("slo_tpot_p99")) q.slo_tpot_p99_s = m.number("slo_tpot_p99", Range::positive());
  if (q.slo_ttft_p99_s <= 0 && q.slo_tpot_p99_s <= 0)
    throw_input_error("kvsim.capacity", 0, "slo_ttft_p99", "give slo_ttft_p99 and/or slo_tpot_p99 (seconds, > 0)");
  q.max_gpus = int(m.integer("max_gpus", Range::between(1, 4096), 64));
  if (m.has("tensor_parallel")) {
    const YAML::Node n = m.node("tensor_parallel");
    for (const YAML::Node& item : n.IsSequence() ? n : YAML::Node(std::vector<YAML::Node>{n})) {
      const double t = m.parse_number(item, "tensor_parallel", Range::between(1, 64));
      if (t != double(int(t)) || !s.model.splits_over(int(t)))
        throw_input_error("kvsim.capacity", 0, "tensor_parallel",
                          "value " + item.Scalar() + " does not split model " + s.model.name +
                              " (query heads, FFN width, KV heads)");
      q.tensor_parallel.push_back(int(t));
    }
  }
  return q;
}

// `kvsim capacity`: JSON, one object per policy.
std::string capacity(const std::string& text, const std::string& name, const std::vector<std::string>& policies,
                     const std::vector<std::string>& sets, const Keywords& kw) {
  YamlMap m = keyword_map(kw, "kvsim.capacity");
  const Scenario s = scenario_from(text, name, overrides_of(m, kServeKeys, policies, sets));
  serve::CapacityQuery q = capacity_query(s, m);
  std::vector<serve::Request> reqs;
  const serve::ServingSpec spec = serving_of(s, m, "kvsim.capacity", reqs);
  std::string trace;
  const Floor floor = floor_of(m, "kvsim.capacity", trace);
  m.finish();
  q.min_recall = floor.min_recall;
  q.max_error = floor.max_error;
  json out = json::array();
  for (const PolicyChoice& pc : s.policies)
    out.push_back(serve::capacity_json(serve::find_capacity(s, pc, spec, reqs, q, q.has_quality() ? &floor.fn : nullptr),
                                       q.has_quality()));
  return out.dump();
}

// What the library offers, for a front end that lists it instead of hard-coding it (the UI): the names
// of every hardware, host, model and calibration file, every policy with its parameters (policy_json,
// plus each range's bounds as numbers), the dtypes and the tensor-parallel range.
std::string catalog() {
  json j = {{"hardware", library_names(LibraryKind::hardware)}, {"host", library_names(LibraryKind::host)},
            {"model", library_names(LibraryKind::model)}, {"calibration", library_names(LibraryKind::calibration)},
            {"dtypes", json::array()}, {"tensor_parallel", {{"min", 1}, {"max", 64}}}, {"policies", json::array()}};
  for (DType t : {DType::fp32, DType::fp16, DType::bf16, DType::fp8}) j["dtypes"].push_back(std::string(to_string(t)));
  for (const Policy* p : all_policies()) {
    json pj = policy_json(*p);
    for (size_t i = 0; i < p->params().size(); ++i) {
      const ParamSpec& ps = p->params()[i];
      pj["params"][i]["min"] = ps.range.lo;
      pj["params"][i]["min_exclusive"] = ps.range.lo_exclusive;
      pj["params"][i]["max"] = ps.range.hi;
      pj["params"][i]["choices"] = ps.choices;
    }
    j["policies"].push_back(pj);
  }
  return j.dump();
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
                       {"predicted_low", row.has_range ? json(row.predicted_low) : json(nullptr)},
                       {"predicted_high", row.has_range ? json(row.predicted_high) : json(nullptr)},
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
  if (!scenario_text.empty()) in = report::run_scenario(scenario_from(scenario_text, scenario_name, Overrides{}));
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
      // (message as printed, file, line, field, message without the location, value, allowed); value
      // and allowed are None where the message names none (core/error_parts.hpp).
      // allowed is a list of its items (core/error_parts.hpp's allowed_items).
      const ErrorParts parts = error_parts(e);
      py::tuple args = py::make_tuple(e.what(), e.file, e.line, e.field, e.message.empty() ? e.what() : e.message,
                                      parts.has_value ? py::object(py::str(parts.value)) : py::object(py::none()),
                                      parts.has_allowed ? py::object(py::cast(allowed_items(parts.allowed)))
                                                        : py::object(py::none()));
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
  m.def("catalog", &catalog, nogil);
  m.def("error_parts", [](const std::string& message) {
    const ErrorParts p = error_parts(message);
    return py::make_tuple(p.has_value ? py::object(py::str(p.value)) : py::object(py::none()),
                          p.has_allowed ? py::object(py::cast(allowed_items(p.allowed))) : py::object(py::none()));
  });
  m.def("report", &report_page, nogil);
  // For the tests: whether a function registered with the same guard runs holding the GIL (it must not).
  m.def("_gil_held_inside", [] { return PyGILState_Check() != 0; }, nogil);
}
