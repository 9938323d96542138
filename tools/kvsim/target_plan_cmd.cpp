#include "tools/kvsim/target_plan_cmd.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <sstream>
#include <nlohmann/json.hpp>

#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "model/policy.hpp"
#include "core/units.hpp"
#include "sweep/evaluator.hpp"
#include "sweep/quality.hpp"
#include "sweep/target_search.hpp"
#include "traces/replay/replay.hpp"
#include "policies/registry.hpp"
#include "core/format.hpp"

namespace kvsim {

struct TargetOptions {
  double tpot_ms = 0, throughput = 0, min_recall = -1, max_error = -1, memory_limit_gib = 8;
  std::string trace;
  int64_t max_steps = 0;
  bool exhaustive = false;
  std::vector<std::string> knobs;  // POLICY.PARAM=V1,V2,...
  std::string quality_cache;
};

TargetOptions* add_target_options(CLI::App& plan) {
  static TargetOptions t;
  auto* tp = plan.add_option("--target-tpot", t.tpot_ms,
                             "capacity planning: per policy the budget and batch with the most throughput at "
                             "TPOT <= MS milliseconds (docs/planning.md)")
                 ->check(CLI::PositiveNumber);
  auto* tx = plan.add_option("--target-throughput", t.throughput,
                             "capacity planning: the budget and batch with the lowest TPOT at >= TOK_S tokens/s per GPU")
                 ->check(CLI::PositiveNumber);
  tp->excludes(tx);
  plan.add_option("--min-recall", t.min_recall, "quality floor: attention-mass recall on --trace")->check(CLI::Range(0.0, 1.0));
  plan.add_option("--max-output-error", t.max_error, "quality floor: attention-output relative error on --trace")
      ->check(CLI::NonNegativeNumber);
  plan.add_option("--trace", t.trace, "trace whose replay gives each configuration's quality");
  plan.add_option("--trace-max-steps", t.max_steps, "replay only the first N decode rows of --trace (0 = all)")
      ->check(CLI::Range(int64_t(0), int64_t(1) << 40));
  plan.add_option("--trace-memory-limit", t.memory_limit_gib, "GiB the float32 trace may take (default 8)")
      ->check(CLI::PositiveNumber);
  plan.add_option("--knob", t.knobs,
                  "POLICY.PARAM=V1,V2,...: search this parameter over these values (ascending: more budget) "
                  "instead of the policy's default knobs (repeatable; docs/planning.md)");
  plan.add_option("--quality-cache", t.quality_cache,
                  "JSON file that keeps replayed quality across runs (same trace file and settings)");
  plan.add_flag("--exhaustive", t.exhaustive, "evaluate every grid point and batch instead of searching (to check the search)");
  return &t;
}

bool target_requested(const TargetOptions& t) { return t.tpot_ms > 0 || t.throughput > 0; }

namespace {
using json = nlohmann::json;
using sweep::TargetAnswer;

}  // namespace

int run_target_plan(const TargetOptions& t, const Scenario& s, const std::string& format, const std::string& out) {
  sweep::Target target;
  target.kind = t.tpot_ms > 0 ? sweep::Target::Kind::tpot : sweep::Target::Kind::throughput;
  target.value = t.tpot_ms > 0 ? t.tpot_ms * 1e-3 : t.throughput;
  if (t.min_recall >= 0) target.min_recall = t.min_recall;
  if (t.max_error >= 0) target.max_error = t.max_error;
  if (target.has_quality() && t.trace.empty())
    throw_input_error("command line", 0, t.min_recall >= 0 ? "--min-recall" : "--max-output-error",
                      "a quality floor needs --trace TRACE (quality comes from replaying it)");
  if (format != "table" && format != "json")
    throw_input_error("command line", 0, "--format", "value '" + format + "' is not allowed with a target; allowed: table, json");

  const Workload& w = s.workload;
  const Deployment dep = sweep::scenario_deployment(s);
  Scenario ideal = s;  // the same deployment with every efficiency 1.0 and no gather penalty
  ideal.calibration = Calibration{};
  const Deployment bound = sweep::scenario_deployment(ideal);

  // --knob: per policy, the parameters and grids to search instead of the defaults.
  std::map<const Policy*, std::vector<sweep::Knob>> custom;
  for (const std::string& k : t.knobs) {
    const size_t dot = k.find('.'), eq = k.find('=');
    auto bad = [&](const std::string& why) { throw_input_error("command line", 0, "--knob", "'" + k + "': " + why); };
    if (dot == std::string::npos || eq == std::string::npos || eq < dot) bad("expected POLICY.PARAM=V1,V2,...");
    const Policy* p = find_policy(k.substr(0, dot));
    if (!p) bad("unknown policy '" + k.substr(0, dot) + "'" + suggestion(k.substr(0, dot), policy_names()));
    const std::string param = k.substr(dot + 1, eq - dot - 1);
    sweep::Knob knob{p->param_index(param), {}};
    if (knob.param < 0) bad("policy " + std::string(p->name()) + " has no parameter '" + param + "'");
    const ParamSpec& spec = p->params()[size_t(knob.param)];
    std::stringstream values(k.substr(eq + 1));
    for (std::string v; std::getline(values, v, ',');) {
      char* end = nullptr;
      const double x = std::strtod(v.c_str(), &end);
      if (v.empty() || *end != '\0') bad("value '" + v + "' is not a number");
      if (!spec.range.contains(x) || (spec.integer && x != std::floor(x)))
        bad("value " + v + " is outside " + param + "'s range " + spec.range.describe() + (spec.integer ? " (integers)" : ""));
      if (!knob.values.empty() && x <= knob.values.back()) bad("values must ascend (more budget = more quality and cost)");
      knob.values.push_back(x);
    }
    if (knob.values.empty()) bad("give at least one value");
    custom[p].push_back(std::move(knob));
  }

  // Quality: one replay per configuration, cached across policies' searches and contexts (and on disk
  // with --quality-cache).
  sweep::TraceSettings ts;
  ts.path = t.trace;
  ts.max_steps = t.max_steps;
  ts.memory_limit_gib = t.memory_limit_gib;
  sweep::QualityCache cache(ts);
  if (!t.trace.empty() && !std::filesystem::exists(t.trace))
    throw_input_error("command line", 0, "--trace", "file '" + t.trace + "' does not exist");
  if (!t.quality_cache.empty()) cache.use_file(t.quality_cache);
  const sweep::QualityFn quality = sweep::quality_from_trace(cache);
  const bool have_trace = !t.trace.empty();

  struct Answer {
    int64_t context;
    std::vector<sweep::Knob> knobs;
    TargetAnswer a;
  };
  std::vector<Answer> answers;
  for (int64_t ctx : w.context_tokens) {
    for (const PolicyChoice& pc : s.policies) {
      sweep::TargetProblem p;
      p.deployment = &dep;
      p.roofline = &bound;
      p.policy = pc.policy;
      p.base = pc.params;
      if (target.has_quality()) p.knobs = custom.count(pc.policy) ? custom[pc.policy] : sweep::budget_knobs(*pc.policy, ctx);
      p.context = ctx;
      p.output = w.output_tokens;
      p.target = target;
      TargetAnswer a = t.exhaustive ? sweep::plan_target_brute_force(p, quality) : sweep::plan_target(p, quality);
      if (a.feasible && !a.quality && have_trace) a.quality = quality(*pc.policy, a.params);
      answers.push_back({ctx, p.knobs, std::move(a)});
    }
  }

  const std::string target_text =
      (target.kind == sweep::Target::Kind::tpot ? "TPOT <= " + fmt("%g", t.tpot_ms) + " ms (most throughput)"
                                                : "throughput >= " + fmt("%g", t.throughput) + " tok/s per GPU (lowest TPOT)") +
      (target.min_recall ? ", recall >= " + fmt("%g", *target.min_recall) : "") +
      (target.max_error ? ", output error <= " + fmt("%g", *target.max_error) : "") +
      (have_trace ? " on " + t.trace : "");
  const std::string cal_text =
      "calibration " + s.calibration.name + (s.calibration.calibrated ? "" : " (uncalibrated: ideal efficiencies)") +
      "; (bound) = the ideal roofline: every efficiency 1.0, no gather penalty";
  std::string text;
  if (format == "json") {
    json j;
    j["schema"] = "kvsim.target_plan/1";
    j["target"] = {{"kind", target.kind == sweep::Target::Kind::tpot ? "tpot" : "throughput"},
                   {"value", target.value},
                   {"min_recall", target.min_recall ? json(*target.min_recall) : json(nullptr)},
                   {"max_output_error", target.max_error ? json(*target.max_error) : json(nullptr)},
                   {"trace", t.trace.empty() ? json(nullptr) : json(t.trace)}};
    j["scenario"] = {{"file", s.file}, {"hardware", s.gpu.name}, {"host", s.host.name}, {"model", s.model.name},
                     {"output_tokens", w.output_tokens}, {"calibration", s.calibration.name},
                     {"calibrated", s.calibration.calibrated}};
    json arr = json::array();
    for (const Answer& an : answers) {
      const TargetAnswer& a = an.a;
      json e = {{"policy", std::string(a.policy->name())}, {"context_tokens", an.context}, {"feasible", a.feasible},
                {"search", {{"cost_evaluations", a.cost_evaluations}, {"quality_evaluations", a.quality_evaluations}}}};
      if (!a.feasible) {
        e["failure"] = a.failure;
      } else {
        json params = json::object();
        for (size_t i = 0; i < a.policy->params().size(); ++i) {
          const ParamSpec& ps = a.policy->params()[i];
          params[ps.name] = ps.choices.empty() ? json(a.params[i]) : json(param_text(ps, a.params[i]));
        }
        e["params"] = params;
        e["batch"] = a.batch;
        e["estimate"] = {{"tpot_s", a.estimate.tpot_s}, {"ttft_s", a.estimate.ttft_s},
                         {"throughput_tok_s", a.estimate.throughput_tok_s}, {"bound", to_string(a.estimate.dominant)},
                         {"hbm_bytes", a.estimate.memory.hbm_bytes}, {"dram_bytes", a.estimate.memory.dram_bytes}};
        e["roofline"] = {{"tpot_s", a.roofline.tpot_s}, {"ttft_s", a.roofline.ttft_s},
                         {"throughput_tok_s", a.roofline.throughput_tok_s}};
        if (a.quality) e["quality"] = {{"recall", a.quality->recall}, {"output_error", a.quality->error ? json(*a.quality->error) : json(nullptr)}};
        e["binding"] = a.binding;
        e["budget_binding"] = a.budget_binding.empty() ? json(nullptr) : json(a.budget_binding);
        json lim = json::array();
        for (const sweep::Limit& l : a.limits) lim.push_back({{"name", l.name}, {"used", l.used}, {"limit", l.limit}, {"slack", l.slack}});
        e["limits"] = lim;
      }
      arr.push_back(e);
    }
    j["answers"] = arr;
    text = j.dump(2) + "\n";
  } else {
    text += "target:   " + target_text + "\n";
    text += "scenario: " + s.model.name + " on " + s.gpu.name + " + " + s.host.name + ", " +
            std::to_string(w.output_tokens) + " output tokens; " + cal_text + "\n";
    char buf[512];
    int64_t shown_ctx = -1;
    for (const Answer& an : answers) {
      const TargetAnswer& a = an.a;
      if (an.context != shown_ctx) {
        shown_ctx = an.context;
        std::snprintf(buf, sizeof buf, "\ncontext %lld\n  %-11s %-34s %6s %18s %22s %8s %8s\n", (long long)an.context,
                      "policy", "budget", "batch", "TPOT ms (bound)", "tok/s/GPU (bound)", "recall", "error");
        text += buf;
      }
      const std::string name(a.policy->name());
      if (!a.feasible) {
        std::snprintf(buf, sizeof buf, "  %-11s ", name.c_str());
        text += buf + ("no feasible configuration: " + a.failure) + "\n";
        continue;
      }
      std::snprintf(buf, sizeof buf, "  %-11s %-34s %6lld %8.3f (%7.3f) %10.1f (%9.1f) %8s %8s\n", name.c_str(),
                    sweep::knobs_text(*a.policy, a.params, an.knobs, "(scenario's)").c_str(), (long long)a.batch, a.estimate.tpot_s * 1e3,
                    a.roofline.tpot_s * 1e3, a.estimate.throughput_tok_s, a.roofline.throughput_tok_s,
                    a.quality ? fmt("%.4f", a.quality->recall).c_str() : "-",
                    a.quality && a.quality->error ? fmt("%.4f", *a.quality->error).c_str() : "-");
      text += buf;
      text += "      binding: " + a.binding + "\n";
      if (!a.budget_binding.empty()) text += "      budget:  " + a.budget_binding + "\n";
      std::string slack;
      for (const sweep::Limit& l : a.limits) {
        const bool quality = l.name == "recall floor" || l.name == "output error ceiling";
        slack += (slack.empty() ? "" : ", ") + l.name + " " +
                 (quality ? fmt("%+.4f", l.slack) : fmt("%.0f%%", 100 * l.slack));
      }
      text += "      slack:   " + slack + "\n";
      text += "      search:  " + std::to_string(a.cost_evaluations) + " cost evaluations, " +
              std::to_string(a.quality_evaluations) + " quality evaluations (replays or cache hits)\n";
    }
  }
  if (out.empty()) std::fwrite(text.data(), 1, text.size(), stdout);
  else write_file_atomic(out, text);
  return 0;
}

}  // namespace kvsim
