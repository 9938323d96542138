#include "tools/kvsim/serve_cmd.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <nlohmann/json.hpp>

#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "core/parallel.hpp"
#include "model/library.hpp"
#include "model/scenario.hpp"
#include "policies/registry.hpp"
#include "serve/capacity.hpp"
#include "serve/step_range.hpp"
#include "serve/serve.hpp"
#include "core/units.hpp"
#include "sweep/quality.hpp"
#include "sweep/quality_source.hpp"

namespace kvsim {

struct ServeCommands {
  CLI::App *serve = nullptr, *capacity = nullptr;
  std::string scenario, format = "table", out, requests_csv, timeline, series;
  std::string hardware, model, calibration;
  Overrides o;
  double rate = 0;
  int64_t requests = 0, concurrency = -1;
  int replicas = 0;
  std::string router, preemption;
  std::string slo_ttft, slo_tpot;
  std::string size_at = "pessimistic";
  int max_gpus = 64;
  std::vector<int> tp;
  // capacity's quality floor (as `kvsim plan --target-*` takes it)
  double min_recall = -1, max_error = -1, memory_limit_gib = 8;
  std::string trace, quality_cache;
  int64_t trace_max_steps = 0;
};

namespace {

using json = nlohmann::json;
using namespace serve;

void emit(const std::string& text, const std::string& path) {
  if (path.empty()) std::fwrite(text.data(), 1, text.size(), stdout);
  else write_file_atomic(path, text);
}

void add_common(CLI::App* c, ServeCommands& s) {
  c->add_option("scenario", s.scenario, "scenario YAML with a serving: block (default: scenarios/serving/default.yaml)");
  c->add_option("--hardware", s.hardware, "GPU: a name from `kvsim hardware list` or a YAML path");
  c->add_option("--model", s.model, "model: a name from `kvsim model list` or a YAML path");
  c->add_option("--calibration", s.calibration, "calibration file (efficiencies); default: the scenario's");
  c->add_option("--policy", s.o.policies, "policy name (repeatable; replaces the scenario's list)");
  c->add_option("--set", s.o.sets, "POLICY.PARAM=VALUE (repeatable)");
  c->add_option("--rate", s.rate, "arrival rate, requests/s (replaces serving.rate)")->check(CLI::PositiveNumber);
  c->add_option("--requests", s.requests, "how many requests (replaces serving.requests)")
      ->check(CLI::Range(int64_t(1), int64_t(10'000'000)));
  c->add_option("--router", s.router, "router across replicas")->check(CLI::IsMember({"round_robin", "least_loaded"}));
  c->add_option("--preemption", s.preemption, "when memory runs out")->check(CLI::IsMember({"recompute", "swap"}));
  c->add_option("--format", s.format, "output format")->check(CLI::IsMember({"table", "json"}));
  c->add_option("-o,--out", s.out, "write the summary to FILE (atomically) instead of standard output");
}

// "2s", "50ms", "250us", or plain seconds.
double parse_duration(const std::string& text, const std::string& option) {
  if (text.empty()) return 0;
  size_t pos = 0;
  double v = 0;
  try {
    v = std::stod(text, &pos);
  } catch (...) {
    pos = 0;
  }
  const std::string unit = text.substr(pos);
  double scale = 0;
  if (pos == 0) scale = 0;
  else if (unit.empty() || unit == "s") scale = 1;
  else if (unit == "ms") scale = 1e-3;
  else if (unit == "us") scale = 1e-6;
  if (scale == 0 || !(v > 0) || !std::isfinite(v))
    throw_input_error("command line", 0, option,
                      "value '" + text + "' is not a duration; allowed: a positive number with s, ms or us (e.g. 2s, 50ms)");
  return v * scale;
}

struct Loaded {
  Scenario s;
  ServingSpec spec;
  std::vector<Request> requests;
};

Loaded load(ServeCommands& c) {
  if (c.scenario.empty()) c.scenario = library_dir() + "/serving/default.yaml";
  if (!c.hardware.empty()) c.o.hardware = c.hardware;
  if (!c.model.empty()) c.o.model = c.model;
  if (!c.calibration.empty()) c.o.calibration = c.calibration;
  Loaded l{load_scenario_file(c.scenario, policy_catalog(), c.o), {}, {}};
  l.spec = read_serving(l.s);
  if (c.rate > 0) {
    if (l.spec.workload.arrivals.kind == ArrivalSpec::Kind::trace)
      throw_input_error("command line", 0, "--rate", "the scenario's arrivals come from a trace file; use serving.time_scale");
    l.spec.workload.arrivals.rate = c.rate;
  }
  if (c.requests > 0) {
    l.spec.workload.requests = c.requests;
    l.spec.workload.duration_s = 0;
  }
  if (c.replicas > 0) l.spec.replicas = c.replicas;
  if (c.concurrency >= 0) l.spec.concurrency = c.concurrency;
  if (!c.router.empty()) l.spec.router = c.router == "least_loaded" ? Router::least_loaded : Router::round_robin;
  if (!c.preemption.empty()) l.spec.engine.preemption = c.preemption == "swap" ? Preemption::swap : Preemption::recompute;
  l.requests = make_requests(l.spec.workload, l.s.model.max_context);
  return l;
}

std::string ms(double s) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f", s * 1e3);
  return b;
}
std::string num(double v, const char* f = "%.3g") {
  char b[32];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

// The lengths of a request file's prompts or outputs, as its header line states them (the scenario's
// length distributions do not apply to a file's requests).
std::string file_lengths(const std::vector<Request>& rs, int64_t Request::*field) {
  std::vector<int64_t> v;
  v.reserve(rs.size());
  for (const Request& r : rs) v.push_back(r.*field);
  if (v.empty()) return "none";
  std::sort(v.begin(), v.end());
  return "from the file (" + std::to_string(v.front()) + "-" + std::to_string(v.back()) + ", median " +
         std::to_string(v[v.size() / 2]) + ")";
}

std::string serve_table(const Loaded& l, const std::vector<ServeResult>& rs) {
  std::string t;
  const ServingSpec& sp = l.spec;
  const bool from_file = sp.workload.arrivals.kind == ArrivalSpec::Kind::trace;
  const std::string prompt = from_file ? file_lengths(l.requests, &Request::prompt_tokens) : sp.workload.prompt.describe();
  const std::string output = from_file ? file_lengths(l.requests, &Request::output_tokens) : sp.workload.output.describe();
  char head[512];
  std::snprintf(head, sizeof head,
                "%s: %lld requests, %s, prompt %s, output %s; %d replica(s) x TP %d, token budget %lld, chunk %lld, "
                "preemption %s\n\n",
                l.s.file.c_str(), (long long)l.requests.size(),
                sp.concurrency > 0 ? ("closed loop of " + std::to_string(sp.concurrency)).c_str()
                : sp.workload.arrivals.kind == ArrivalSpec::Kind::trace ? ("trace " + sp.workload.arrivals.file).c_str()
                    : (num(sp.workload.arrivals.rate) + " req/s " +
                       (sp.workload.arrivals.kind == ArrivalSpec::Kind::gamma ? "gamma" : "poisson"))
                          .c_str(),
                prompt.c_str(), output.c_str(), sp.replicas,
                l.s.workload.tensor_parallel, (long long)sp.engine.token_budget, (long long)sp.engine.chunk_tokens,
                preemption_name(sp.engine.preemption));
  t += head;
  char line[512];
  std::snprintf(line, sizeof line, "%-12s %9s %9s %9s %9s %9s %9s %10s %8s %7s %6s %6s  %s\n", "policy", "TTFT p50",
                "TTFT p99", "TPOT p50", "TPOT p99", "E2E p50", "E2E p99", "tok/s", "goodput", "batch", "preempt",
                "reject", "");
  t += line;
  std::snprintf(line, sizeof line, "%-12s %9s %9s %9s %9s %9s %9s %10s %8s %7s %6s %6s\n", "", "ms", "ms", "ms", "ms",
                "s", "s", "", "req/s", "mean", "", "");
  t += line;
  for (const ServeResult& r : rs) {
    const ServeSummary& s = r.summary;
    std::snprintf(line, sizeof line, "%-12s %9s %9s %9s %9s %9s %9s %10s %8s %7s %6lld %6lld  %s\n", r.label.c_str(),
                  ms(s.ttft.p50).c_str(), ms(s.ttft.p99).c_str(), ms(s.tpot.p50).c_str(), ms(s.tpot.p99).c_str(),
                  num(s.e2e.p50).c_str(), num(s.e2e.p99).c_str(), num(s.throughput_tok_s, "%.0f").c_str(),
                  num(s.goodput_rate).c_str(), num(s.mean_batch, "%.1f").c_str(), (long long)s.preemptions,
                  (long long)s.rejected, s.overloaded ? "OVERLOADED" : "");
    t += line;
  }
  if (sp.slo_ttft_s > 0 || sp.slo_tpot_s > 0)
    t += "\ngoodput: finished requests per second meeting TTFT <= " + (sp.slo_ttft_s > 0 ? ms(sp.slo_ttft_s) + " ms" : "-") +
         " and TPOT <= " + (sp.slo_tpot_s > 0 ? ms(sp.slo_tpot_s) + " ms" : "-") + "\n";
  for (const ServeResult& r : rs)
    if (r.summary.overloaded) t += r.label + ": " + r.summary.overload_reason + "\n";
  return t;
}

int run_serve(ServeCommands& c) {
  Loaded l = load(c);
  const Deployment d = make_deployment(l.s);
  const bool record = !c.timeline.empty() || !c.series.empty();
  // Policies are independent: one per core.
  const size_t n = l.s.policies.size();
  std::vector<ServeResult> results(n);
  // Each policy's step times carry the plan's 80% range (serve/step_range.hpp): the run again at each
  // end, on the tables the estimate's run filled.
  std::vector<ServeRange> ranges(n);
  std::atomic<int> done{0};
  std::mutex print;
  parallel_for(int(n), [&](int i, int) {
    const PolicyChoice& pc = l.s.policies[size_t(i)];
    StepCosts costs(d, *pc.policy, pc.params, max_prompt(l.requests));
    results[size_t(i)] = run_serving(costs, *pc.policy, l.spec, l.requests, record);
    ranges[size_t(i)] = serve_range(costs, pc, l.spec, l.requests);
    const ServeResult& r = results[size_t(i)];
    std::lock_guard<std::mutex> lock(print);
    std::fprintf(stderr, "serve: %s (%d/%zu): %zu requests, %lld iterations in %.3f s (%.0f requests/s, %.0f iterations/s)\n",
                 r.label.c_str(), ++done, n, l.requests.size(), (long long)r.summary.iterations, r.wall_s,
                 r.wall_s > 0 ? double(r.summary.requests) / r.wall_s : 0,
                 r.wall_s > 0 ? double(r.summary.iterations) / r.wall_s : 0);
  });
  // Entries of the same policy (with different parameters) are told apart by their entry index.
  for (size_t a = 0; a < results.size(); ++a)
    for (size_t b = 0; b < results.size(); ++b)
      if (a != b && results[a].label == std::string(l.s.policies[b].policy->name())) {
        results[a].label += "#" + std::to_string(a);
        break;
      }
  if (!c.requests_csv.empty()) write_file_atomic(c.requests_csv, requests_csv(results));
  if (!c.series.empty()) write_file_atomic(c.series, iterations_csv(results));
  if (!c.timeline.empty()) write_file_atomic(c.timeline, iterations_timeline(results).dump() + "\n");
  if (c.format == "json") {
    json j;
    j["scenario"] = l.s.file;
    j["requests"] = l.requests.size();
    j["policies"] = json::array();
    for (size_t i = 0; i < n; ++i) {
      json p = summary_json(results[i], l.spec);
      p["range"] = serve_range_json(ranges[i]);
      j["policies"].push_back(p);
    }
    emit(j.dump(2) + "\n", c.out);
  } else {
    std::string t = serve_table(l, results);
    t += "\n80% range (docs/uncertainty.md): each run again with its step times at the low and the high end of the "
         "plan's range at the median request:\n";
    for (size_t i = 0; i < n; ++i) {
      const ServeRange& r = ranges[i];
      if (!r.run) {
        t += "  " + results[i].label + ": unknown (the median request does not fit)\n";
        continue;
      }
      t += "  " + results[i].label + ": step times x" + num(r.steps.decode_low, "%.2f") + "-x" +
           num(r.steps.decode_high, "%.2f") + " (decode); TTFT p99 " + ms(r.low.ttft.p99) + "-" + ms(r.high.ttft.p99) +
           " ms, TPOT p99 " + ms(r.low.tpot.p99) + "-" + ms(r.high.tpot.p99) + " ms, " +
           num(r.high.throughput_tok_s, "%.0f") + "-" + num(r.low.throughput_tok_s, "%.0f") + " tok/s" +
           (r.high.overloaded ? " (OVERLOADED at the high end)" : "") + "\n";
    }
    emit(t, c.out);
  }
  return 0;
}

int run_capacity(ServeCommands& c) {
  CapacityQuery q;
  q.slo_ttft_p99_s = parse_duration(c.slo_ttft, "--slo-ttft-p99");
  q.slo_tpot_p99_s = parse_duration(c.slo_tpot, "--slo-tpot-p99");
  q.max_gpus = c.max_gpus;
  q.tensor_parallel = c.tp;
  if (q.slo_ttft_p99_s <= 0 && q.slo_tpot_p99_s <= 0)
    throw_input_error("command line", 0, "--slo-ttft-p99", "give --slo-ttft-p99 and/or --slo-tpot-p99 (e.g. 2s, 50ms)");
  Loaded l = load(c);
  if (l.spec.concurrency > 0)
    throw_input_error(l.s.file, 0, "serving.concurrency",
                      "value " + std::to_string(l.spec.concurrency) +
                          ": capacity answers for an arrival rate, and a closed loop has none; allowed: 0 (open loop)");
  const ModelConfig& m = l.s.model;
  for (int tp : q.tensor_parallel)
    if (!m.splits_over(tp))
      throw_input_error("command line", 0, "--tp",
                        "value " + std::to_string(tp) + " must divide query_heads (" + std::to_string(m.query_heads) +
                            ") and ffn_hidden (" + std::to_string(m.ffn_hidden) +
                            "), and divide or be a multiple of kv_heads (" + std::to_string(m.kv_heads) +
                            ") of model " + m.name);
  if (c.min_recall >= 0) q.min_recall = c.min_recall;
  if (c.max_error >= 0) q.max_error = c.max_error;
  q.pessimistic = c.size_at == "pessimistic";
  if (q.has_quality() && c.trace.empty())
    throw_input_error("command line", 0, c.min_recall >= 0 ? "--min-recall" : "--max-output-error",
                      "a quality floor needs --trace TRACE (quality comes from replaying it)");
  // The trace: a file, or a synthetic config generated at the workload's longest prompt.
  sweep::TraceSettings ts;
  ts.path = c.trace;
  ts.max_steps = c.trace_max_steps;
  ts.memory_limit_gib = c.memory_limit_gib;
  sweep::QualitySource source;
  if (!c.trace.empty()) {
    int64_t longest = 1;
    for (const Request& r : l.requests) longest = std::max(longest, r.prompt_tokens);
    source = sweep::resolve_quality_source(c.trace, longest, c.memory_limit_gib * kGiB);
    ts.synthetic = source.synthetic;
  }
  sweep::QualityCache cache(ts);
  if (!c.quality_cache.empty()) cache.use_file(c.quality_cache);
  const sweep::QualityFn quality = sweep::quality_from_trace(cache);
  // Policies are independent: one per core, except under a quality floor, whose trace replays share
  // one cache (and run in parallel themselves).
  const size_t n = l.s.policies.size();
  std::vector<CapacityResult> results(n);
  std::atomic<int> done{0};
  std::mutex print;
  parallel_for(int(n), [&](int i, int) {
    const PolicyChoice& pc = l.s.policies[size_t(i)];
    results[size_t(i)] = find_capacity(l.s, pc, l.spec, l.requests, q, q.has_quality() ? &quality : nullptr);
    std::lock_guard<std::mutex> lock(print);
    std::fprintf(stderr, "capacity: %s (%d/%zu): %zu trials\n", std::string(pc.policy->name()).c_str(), ++done, n,
                 results[size_t(i)].trials.size());
  }, q.has_quality() ? 1 : 0);
  if (c.format == "json") {
    json j;
    j["scenario"] = l.s.file;
    j["rate"] = l.spec.workload.arrivals.rate;
    j["requests"] = l.requests.size();
    j["slo"] = {{"ttft_p99_s", q.slo_ttft_p99_s}, {"tpot_p99_s", q.slo_tpot_p99_s}};
    j["router"] = router_name(l.spec.router);
    j["sized_at"] = q.pessimistic ? "pessimistic" : "estimate";
    j["quality_floor"] = {{"min_recall", q.min_recall ? json(*q.min_recall) : json(nullptr)},
                          {"max_output_error", q.max_error ? json(*q.max_error) : json(nullptr)},
                          {"trace", c.trace.empty() ? json(nullptr) : json(c.trace)},
                          {"source", c.trace.empty() ? json(nullptr)
                                                     : json{{"kind", sweep::kind_name(source.kind)},
                                                            {"description", source.description}}}};
    j["policies"] = json::array();
    for (const CapacityResult& r : results) {
      j["policies"].push_back(capacity_json(r, q.has_quality()));
    }
    emit(j.dump(2) + "\n", c.out);
    return 0;
  }
  std::string t = "capacity at " + num(l.spec.workload.arrivals.rate) + " req/s (" + std::to_string(l.requests.size()) +
                  " requests), p99 TTFT <= " + (q.slo_ttft_p99_s > 0 ? ms(q.slo_ttft_p99_s) + " ms" : "-") +
                  ", p99 TPOT <= " + (q.slo_tpot_p99_s > 0 ? ms(q.slo_tpot_p99_s) + " ms" : "-") + ", router " +
                  router_name(l.spec.router) +
                  (q.has_quality() ? std::string(", quality floor") +
                                         (q.min_recall ? " recall >= " + num(*q.min_recall) : "") +
                                         (q.max_error ? " output error <= " + num(*q.max_error) : "") + " on " + c.trace
                                   : std::string()) +
                  "\n" + (q.has_quality() ? "quality from " + source.description + "\n" : std::string()) +
                  (q.pessimistic ? "sized at the pessimistic end of the plan's 80% range (docs/uncertainty.md): each "
                                   "policy's step times scaled by its range's high end (--size-at estimate: at the estimate)\n"
                                 : "sized at the estimate (--size-at estimate)\n") +
                  "\n";
  char line[512];
  std::snprintf(line, sizeof line, "%-12s %5s %4s %9s %11s %11s %9s\n", "policy", "GPUs", "TP", "replicas",
                "TTFT p99 ms", "TPOT p99 ms", "trials");
  t += line;
  for (const CapacityResult& r : results) {
    if (r.found)
      std::snprintf(line, sizeof line, "%-12s %5d %4d %9d %11s %11s %9zu\n", r.policy.c_str(), r.gpus(),
                    r.tensor_parallel, r.replicas, ms(r.summary.ttft.p99).c_str(), ms(r.summary.tpot.p99).c_str(),
                    r.trials.size());
    else
      std::snprintf(line, sizeof line, "%-12s %5s  %s\n", r.policy.c_str(), "-", r.reason.c_str());
    t += line;
    if (r.found && r.pessimistic)
      t += "             step times x" + num(r.decode_scale, "%.3f") + " (decode), x" + num(r.prefill_scale, "%.3f") +
           " (prefill): the 80% range's high end at the median request\n";
    if (q.has_quality() && !r.budget.empty())
      t += "             budget " + r.budget +
           (r.quality ? ", recall " + num(r.quality->recall, "%.4f") +
                            (r.quality->error ? ", output error " + num(*r.quality->error, "%.4f") : "")
                      : "") +
           "\n";
  }
  emit(t, c.out);
  return 0;
}

}  // namespace

ServeCommands* add_serve_commands(CLI::App& app) {
  static ServeCommands commands;  // lives for the process, as the other commands' state does (no leak for ASan)
  auto* c = &commands;
  c->serve = app.add_subcommand("serve", "requests over time: continuous batching, TTFT/TPOT percentiles, goodput");
  add_common(c->serve, *c);
  c->serve->add_option("--concurrency", c->concurrency, "closed loop of N clients (replaces serving.concurrency)");
  c->serve->add_option("--replicas", c->replicas, "replicas behind the router (replaces serving.replicas)")
      ->check(CLI::PositiveNumber);
  c->serve->add_option("--requests-csv", c->requests_csv, "write one row per request to FILE");
  c->serve->add_option("--timeline", c->timeline, "write the iterations as a Chrome trace-event JSON (Perfetto)");
  c->serve->add_option("--series", c->series, "write one row per iteration to FILE (tools/plot/plot.py queue)");
  c->capacity = app.add_subcommand("capacity", "the fewest GPUs (replicas x TP) per policy that meet p99 SLOs at a rate");
  add_common(c->capacity, *c);
  c->capacity->add_option("--slo-ttft-p99", c->slo_ttft, "p99 TTFT target, e.g. 2s");
  c->capacity->add_option("--slo-tpot-p99", c->slo_tpot, "p99 TPOT target, e.g. 50ms");
  c->capacity->add_option("--max-gpus", c->max_gpus, "largest GPU count to try")->check(CLI::Range(1, 4096));
  c->capacity->add_option("--size-at", c->size_at,
                          "which end of the plan's 80% range (docs/uncertainty.md) to size at: pessimistic (every "
                          "step time at the range's high end; the default) or estimate")
      ->check(CLI::IsMember({"pessimistic", "estimate"}));
  c->capacity->add_option("--tp", c->tp, "tensor-parallel degrees to try (repeatable; default 1 2 4 8)");
  c->capacity->add_option("--min-recall", c->min_recall, "quality floor: attention-mass recall on --trace")
      ->check(CLI::Range(0.0, 1.0));
  c->capacity->add_option("--max-output-error", c->max_error, "quality floor: attention-output relative error on --trace")
      ->check(CLI::NonNegativeNumber);
  c->capacity->add_option("--trace", c->trace, "trace whose replay gives each budget's quality");
  c->capacity->add_option("--trace-max-steps", c->trace_max_steps, "replay only the first N decode rows (0 = all)")
      ->check(CLI::Range(int64_t(0), int64_t(1) << 40));
  c->capacity->add_option("--trace-memory-limit", c->memory_limit_gib, "GiB the float32 trace may take (default 8)")
      ->check(CLI::PositiveNumber);
  c->capacity->add_option("--quality-cache", c->quality_cache, "JSON file that keeps replayed quality across runs");
  return c;
}

int run_serve_commands(ServeCommands& c) {
  if (c.serve->parsed()) return run_serve(c);
  if (c.capacity->parsed()) return run_capacity(c);
  return -1;
}

}  // namespace kvsim
