#include "sweep/target_plan.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/format.hpp"
#include "model/policy_setting.hpp"

namespace kvsim::sweep {

namespace {
using json = nlohmann::json;

bool is_tpot(const Target& t) { return t.kind == Target::Kind::tpot; }

// What the target asks, in words: "TPOT <= 30 ms (most throughput), recall >= 0.9 on t.safetensors".
std::string target_text(const TargetPlanRequest& r) {
  const Target& t = r.target;
  return (is_tpot(t) ? "TPOT <= " + fmt("%g", t.value * 1e3) + " ms (most throughput)"
                     : "throughput >= " + fmt("%g", t.value) + " tok/s per GPU (lowest TPOT)") +
         (t.min_recall ? ", recall >= " + fmt("%g", *t.min_recall) : "") +
         (t.max_error ? ", output error <= " + fmt("%g", *t.max_error) : "") +
         (r.quality ? " on " + r.trace : "") +
         (t.pessimistic ? "; sized at the pessimistic end of the 80% range (docs/uncertainty.md)" : "; sized at the estimate");
}

json answer_json(const TargetPlanEntry& an) {
  const TargetAnswer& a = an.answer;
  json e = {{"policy", std::string(a.policy->name())}, {"context_tokens", an.context}, {"feasible", a.feasible},
            {"search", {{"cost_evaluations", a.cost_evaluations}, {"quality_evaluations", a.quality_evaluations}}}};
  if (!a.feasible) {
    e["failure"] = a.failure;
    return e;
  }
  json params = json::object();
  for (size_t i = 0; i < a.policy->params().size(); ++i) {
    const ParamSpec& ps = a.policy->params()[i];
    params[ps.name] = ps.choices.empty() ? json(a.params[i]) : json(param_text(ps, a.params[i]));
  }
  e["params"] = params;
  e["batch"] = a.batch;
  e["sized_at"] = an.pessimistic ? "pessimistic" : "estimate";
  e["estimate"] = {{"tpot_s", a.estimate.tpot_s}, {"ttft_s", a.estimate.ttft_s},
                   {"tpot_s_low", a.estimate.tpot_lo_s}, {"tpot_s_high", a.estimate.tpot_hi_s},
                   {"ttft_s_low", a.estimate.ttft_lo_s}, {"ttft_s_high", a.estimate.ttft_hi_s},
                   {"throughput_tok_s_low", a.estimate.throughput_lo_tok_s()},
                   {"throughput_tok_s_high", a.estimate.throughput_hi_tok_s()},
                   {"throughput_tok_s", a.estimate.throughput_tok_s}, {"bound", to_string(a.estimate.dominant)},
                   {"hbm_bytes", a.estimate.memory.hbm_bytes}, {"dram_bytes", a.estimate.memory.dram_bytes}};
  e["roofline"] = {{"tpot_s", a.roofline.tpot_s}, {"ttft_s", a.roofline.ttft_s},
                   {"throughput_tok_s", a.roofline.throughput_tok_s}};
  if (a.quality)
    e["quality"] = {{"recall", a.quality->recall}, {"output_error", a.quality->error ? json(*a.quality->error) : json(nullptr)}};
  e["binding"] = a.binding;
  e["budget_binding"] = a.budget_binding.empty() ? json(nullptr) : json(a.budget_binding);
  json lim = json::array();
  for (const Limit& l : a.limits) lim.push_back({{"name", l.name}, {"used", l.used}, {"limit", l.limit}, {"slack", l.slack}});
  e["limits"] = lim;
  return e;
}

// One policy's lines of the table.
std::string answer_text(const TargetPlanEntry& an) {
  const TargetAnswer& a = an.answer;
  const std::string name(a.policy->name());
  char buf[512];
  if (!a.feasible) {
    std::snprintf(buf, sizeof buf, "  %-11s ", name.c_str());
    return buf + ("no feasible configuration: " + a.failure) + "\n";
  }
  std::snprintf(buf, sizeof buf, "  %-11s %-34s %6lld %8.3f (%7.3f) %10.1f (%9.1f) %8s %8s\n", name.c_str(),
                knobs_text(*a.policy, a.params, an.knobs, "(scenario's)").c_str(), (long long)a.batch,
                a.estimate.tpot_s * 1e3, a.roofline.tpot_s * 1e3, a.estimate.throughput_tok_s,
                a.roofline.throughput_tok_s, a.quality ? fmt("%.4f", a.quality->recall).c_str() : "-",
                a.quality && a.quality->error ? fmt("%.4f", *a.quality->error).c_str() : "-");
  std::string text = buf;
  text += "      range:   TPOT " + fmt("%.3f", a.estimate.tpot_lo_s * 1e3) + "-" + fmt("%.3f", a.estimate.tpot_hi_s * 1e3) +
          " ms, " + fmt("%.1f", a.estimate.throughput_lo_tok_s()) + "-" + fmt("%.1f", a.estimate.throughput_hi_tok_s()) +
          " tok/s/GPU (80%; " + (an.pessimistic ? "sized at the pessimistic end" : "sized at the estimate") + ")\n";
  text += "      binding: " + a.binding + "\n";
  if (!a.budget_binding.empty()) text += "      budget:  " + a.budget_binding + "\n";
  std::string slack;
  for (const Limit& l : a.limits) {
    const bool quality = l.name == "recall floor" || l.name == "output error ceiling";
    slack += (slack.empty() ? "" : ", ") + l.name + " " + (quality ? fmt("%+.4f", l.slack) : fmt("%.0f%%", 100 * l.slack));
  }
  text += "      slack:   " + slack + "\n";
  text += "      search:  " + std::to_string(a.cost_evaluations) + " cost evaluations, " +
          std::to_string(a.quality_evaluations) + " quality evaluations (replays or cache hits)\n";
  return text;
}

}  // namespace

std::vector<TargetPlanEntry> plan_targets(const Scenario& s, const TargetPlanRequest& r) {
  if (r.target.has_quality() && !r.quality)
    throw std::logic_error("plan_targets: a quality floor without a quality function");
  const Workload& w = s.workload;
  const Deployment dep = make_deployment(s);
  Scenario ideal = s;  // the same deployment with every efficiency 1.0 and no gather penalty
  ideal.calibration = Calibration{};
  const Deployment bound = make_deployment(ideal);
  const QualityFn none = [](const Policy&, const ParamValues&) -> QualityValue {
    throw std::logic_error("plan_targets: quality asked for without a trace");
  };
  const QualityFn& quality = r.quality ? *r.quality : none;

  std::vector<TargetPlanEntry> answers;
  for (int64_t ctx : w.context_tokens) {
    for (const PolicyChoice& pc : s.policies) {
      TargetProblem p;
      p.deployment = &dep;
      p.roofline = &bound;
      p.policy = pc.policy;
      p.base = pc.params;
      if (r.target.has_quality()) {
        const auto custom = r.knobs.find(pc.policy);
        p.knobs = custom != r.knobs.end() ? custom->second : budget_knobs(*pc.policy, ctx);
      }
      p.context = ctx;
      p.output = w.output_tokens;
      p.target = r.target;
      TargetAnswer a = r.exhaustive ? plan_target_brute_force(p, quality) : plan_target(p, quality);
      if (a.feasible && !a.quality && r.quality) a.quality = quality(*pc.policy, a.params);
      answers.push_back({ctx, p.knobs, std::move(a), r.target.pessimistic});
    }
  }
  return answers;
}

void add_knob(const std::string& text, const PolicyCatalog& catalog, std::map<const Policy*, std::vector<Knob>>& knobs) {
  auto bad = [&](const std::string& why) { throw_input_error("command line", 0, "--knob", "'" + text + "': " + why); };
  const PolicySetting set = parse_policy_setting(text, "--knob", "POLICY.PARAM=V1,V2,...");
  const Policy* p = catalog.find(set.policy);
  if (!p) bad("unknown policy '" + set.policy + "'" + suggestion(set.policy, catalog.names()));
  Knob knob{setting_param_index(*p, set.param, "--knob"), {}};
  const ParamSpec& spec = p->params()[size_t(knob.param)];
  std::stringstream values(set.value);
  for (std::string v; std::getline(values, v, ',');) {
    char* end = nullptr;
    const double x = std::strtod(v.c_str(), &end);
    if (v.empty() || *end != '\0') bad("value '" + v + "' is not a number");
    if (!spec.range.contains(x) || (spec.integer && x != std::floor(x)))
      bad("value " + v + " is outside " + set.param + "'s range " + spec.range.describe() + (spec.integer ? " (integers)" : ""));
    if (!knob.values.empty() && x <= knob.values.back()) bad("values must ascend (more budget = more quality and cost)");
    knob.values.push_back(x);
  }
  if (knob.values.empty()) bad("give at least one value");
  knobs[p].push_back(std::move(knob));
}

std::string target_plan_json(const Scenario& s, const TargetPlanRequest& r, const std::vector<TargetPlanEntry>& answers) {
  const Target& t = r.target;
  json j;
  j["schema"] = "kvsim.target_plan/1";
  j["target"] = {{"kind", is_tpot(t) ? "tpot" : "throughput"},
                 {"value", t.value},
                 {"min_recall", t.min_recall ? json(*t.min_recall) : json(nullptr)},
                 {"max_output_error", t.max_error ? json(*t.max_error) : json(nullptr)},
                 {"trace", r.trace.empty() ? json(nullptr) : json(r.trace)},
                 {"quality_source", r.quality_source.empty() ? json(nullptr)
                                                             : json{{"kind", r.quality_kind}, {"description", r.quality_source}}}};
  j["scenario"] = {{"file", s.file}, {"hardware", s.gpu.name}, {"host", s.host.name}, {"model", s.model.name},
                   {"output_tokens", s.workload.output_tokens}, {"calibration", s.calibration.name},
                   {"calibrated", s.calibration.calibrated}};
  json arr = json::array();
  for (const TargetPlanEntry& an : answers) arr.push_back(answer_json(an));
  j["answers"] = arr;
  return j.dump(2) + "\n";
}

std::string target_plan_text(const Scenario& s, const TargetPlanRequest& r, const std::vector<TargetPlanEntry>& answers) {
  const std::string cal_text =
      "calibration " + s.calibration.name + (s.calibration.calibrated ? "" : " (uncalibrated: ideal efficiencies)") +
      "; (bound) = the ideal roofline: every efficiency 1.0, no gather penalty";
  std::string text = "target:   " + target_text(r) + "\n";
  if (!r.quality_source.empty()) text += "quality:  from " + r.quality_source + "\n";
  text += "scenario: " + s.model.name + " on " + s.gpu.name + " + " + s.host.name + ", " +
          std::to_string(s.workload.output_tokens) + " output tokens; " + cal_text + "\n";
  int64_t shown_ctx = -1;
  for (const TargetPlanEntry& an : answers) {
    if (an.context != shown_ctx) {
      shown_ctx = an.context;
      char buf[256];
      std::snprintf(buf, sizeof buf, "\ncontext %lld\n  %-11s %-34s %6s %18s %22s %8s %8s\n", (long long)an.context,
                    "policy", "budget", "batch", "TPOT ms (bound)", "tok/s/GPU (bound)", "recall", "error");
      text += buf;
    }
    text += answer_text(an);
  }
  return text;
}

}  // namespace kvsim::sweep
