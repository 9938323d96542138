// A whole `kvsim replay`: the policies chosen, their runs (one per budget with --budget-sweep), the
// trace loaded, the needle and answer found with the model's tokenizer, the replay and the model in
// the loop, then the cost model with the analytical defaults and with the measured statistics; and
// the report in table, JSON (kvsim.replay/1) or CSV. The CLI only parses options and prints.
#include "replay/session.hpp"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "core/error.hpp"
#include "core/format.hpp"
#include "core/units.hpp"
#include "model/library.hpp"
#include "model/report.hpp"
#include "model/step_timeline.hpp"
#include "policies/registry.hpp"
#include "traces/format/trace_file.hpp"
#include "traces/llm/gguf.hpp"
#include "traces/llm/llama.hpp"
#include "traces/llm/model_path.hpp"
#include "traces/llm/text_span.hpp"
#include "traces/llm/tokenizer.hpp"
#include "replay/budget.hpp"
#include "replay/device_report.hpp"

namespace kvsim::replay {

namespace {

using json = nlohmann::json;

json summary_json(const Summary& s) { return {{"mean", s.mean}, {"p10", s.p10}, {"p50", s.p50}, {"p90", s.p90}, {"min", s.min}, {"max", s.max}, {"n", s.n}}; }

json quality_json(const Quality& q) {
  return {{"attention_recall", summary_json(q.recall)},
          {"output_error", q.error ? summary_json(*q.error) : json(nullptr)},
          {"topk_recall", summary_json(q.topk_recall)},
          {"tokens_attended", summary_json(q.tokens)},
          {"needle_recall", q.focus ? summary_json(*q.focus) : json(nullptr)}};
}

struct Bytes {
  double hbm = 0, dram = 0, h2d = 0, d2h = 0, link = 0;
};
Bytes decode_bytes(const PlanResult& r) {
  Bytes b;
  for (const PhaseResult& p : r.decode) {
    b.hbm += p.phase.work.hbm_bytes;
    b.dram += p.phase.work.dram_bytes;
    b.h2d += p.phase.work.h2d_bytes;
    b.d2h += p.phase.work.d2h_bytes;
    b.link += p.phase.work.link_bytes;
  }
  return b;
}

json plan_json_of(const PlanResult& r) {
  if (!r.feasible) return {{"feasible", false}, {"reason", r.reason}};
  const Bytes b = decode_bytes(r);
  return {{"feasible", true},
          {"batch", r.batch},
          {"tpot_s", r.tpot_s},
          {"ttft_s", r.ttft_s},
          {"throughput_tok_s", r.throughput_tok_s},
          {"hbm_bytes", r.memory.hbm_bytes},
          {"kv_hbm_bytes", r.memory.kv_hbm_bytes},
          {"dram_bytes", r.memory.dram_bytes},
          {"decode_step_bytes", {{"hbm", b.hbm}, {"dram", b.dram}, {"h2d", b.h2d}, {"d2h", b.d2h}, {"link", b.link}}}};
}

const char* rule_text(CarryRule r) { return r == CarryRule::as_is ? "as_is" : "scale_context"; }
std::string tpot_text(const PlanResult& r) { return r.feasible ? fmt("%.3f", r.tpot_s * 1e3) : "infeasible"; }

}  // namespace

namespace {

// The policies to replay: the request's (each must have a trace selector) or every one with a selector.
// Checks the request's device and kernels too.
std::vector<std::string> replay_policies(const ReplayRequest& c) {
  if (c.device != "cpu" && c.device != "cuda")
    throw_input_error("command line", 0, "--device", "unknown device '" + c.device + "'; allowed: cpu, cuda");
  if (c.kernels != "optimized" && c.kernels != "reference")
    throw_input_error("command line", 0, "--kernels",
                      "unknown kernels '" + c.kernels + "'; allowed: optimized, reference");
  // Policies: the given ones (each must have a selector) or every one with a selector.
  std::vector<std::string> with_selector;
  for (const std::string& n : policy_names())
    if (has_selector(n)) with_selector.push_back(n);
  const std::vector<std::string> names = c.policies.empty() ? with_selector : c.policies;
  for (const std::string& n : names) {
    if (!find_policy(n))
      throw_input_error("command line", 0, "--policy",
                        "unknown policy '" + n + "'" + suggestion(n, policy_names()) + "; with a trace selector: " +
                            join(with_selector));
    if (!has_selector(n))
      throw_input_error("command line", 0, "--policy",
                        "policy '" + n + "' has no trace selector yet; with one: " + join(with_selector));
  }
  return names;
}

// Runs: each policy at its (scenario + --set) parameters, or at every sweep budget.
std::vector<PolicyRun> policy_runs(const Scenario& s, const ReplayRequest& c, int64_t P) {
  std::vector<PolicyRun> runs;
  for (const PolicyChoice& pc : s.policies) {
    const std::string name(pc.policy->name());
    if (c.budget_sweep && has_budget(*pc.policy)) {
      for (int64_t b : sweep_budgets(P)) {
        ParamValues v = pc.params.empty() ? pc.policy->defaults() : pc.params;
        if (set_budget(*pc.policy, v, P, b)) runs.push_back({name, v, name + "@" + std::to_string(b)});
      }
    } else {
      runs.push_back({name, pc.params, name});
    }
  }
  return runs;
}

// --needle / --answer: token spans found with the model's tokenizer, into rep.needle_tokens and
// rep.answer_end_step (nothing without either).
void find_needle_and_answer(const ReplayRequest& c, const TraceFile& trace, int64_t P, ReplayReport& rep) {
  std::vector<int32_t>& needle_tokens = rep.needle_tokens;
  int64_t& answer_end_step = rep.answer_end_step;
  if (c.needle_span != std::pair<int64_t, int64_t>{0, 0}) {
    if (!c.needle.empty())
      throw_input_error("command line", 0, "--needle-tokens", "give either --needle TEXT or --needle-tokens, not both");
    const auto [a, b] = c.needle_span;
    if (a < 0 || b <= a || b > P)
      throw_input_error(c.trace, 0, "--needle-tokens",
                        "value '" + std::to_string(a) + ":" + std::to_string(b) +
                            "' is not a span of the prompt; allowed: FIRST:END with 0 <= FIRST < END <= " +
                            std::to_string(P) + " (the prompt's tokens)");
    for (int64_t t = a; t < b; ++t) needle_tokens.push_back(int32_t(t));
  }
  if (!c.needle.empty() || !c.answer.empty()) {
    const std::string gguf = c.model_in_the_loop.empty() ? llm::default_model_path() : c.model_in_the_loop;
    if (std::error_code ec; !std::filesystem::exists(gguf, ec))
      throw_input_error("command line", 0, c.needle.empty() ? "--answer" : "--needle",
                        "needs the trace's model for its tokenizer: '" + gguf +
                            "' does not exist (give --model-in-the-loop FILE.gguf, or run tools/fetch-model.sh)");
    const llm::Tokenizer tok{llm::GgufFile(gguf)};
    const auto& ids = trace.tokens().token_ids;
    if (!c.needle.empty()) {
      const auto span = llm::find_text_tokens(tok, ids, c.needle, 0, P);
      if (!span)
        throw_input_error(c.trace, 0, "--needle", "text '" + c.needle + "' does not occur in the trace's prompt");
      for (int64_t t = span->first; t < span->second; ++t) needle_tokens.push_back(int32_t(t));
    }
    if (!c.answer.empty()) {
      if (c.model_in_the_loop.empty())
        throw_input_error("command line", 0, "--answer", "needs --model-in-the-loop FILE.gguf (the model decodes)");
      const auto span = llm::find_text_tokens(tok, ids, c.answer, P, int64_t(ids.size()));
      if (!span)
        throw_input_error(c.trace, 0, "--answer",
                          "text '" + c.answer + "' does not occur in the trace's generated tokens");
      // Token t (>= P + 1) is predicted by the step that feeds token t - 1, step index t - 1 - P; token P
      // comes from the prefill, which every policy shares.
      answer_end_step = std::max<int64_t>(0, span->second - 1 - 1 - P);
      if (c.max_steps > 0 && c.max_steps <= answer_end_step)
        throw_input_error("command line", 0, "--max-steps",
                          std::to_string(c.max_steps) + " steps end before the answer, which needs " +
                              std::to_string(answer_end_step + 1));
    }
  }
}

// The cost model on the scenario's hardware and model, at the scenario's context: analytical defaults
// and measured statistics side by side, one ReplayRow per policy run.
void simulate_rows(ReplayReport& rep) {
  const Scenario& s = rep.scenario;
  const ReplayResult& res = rep.result;
  const int64_t P = rep.meta.prompt_tokens;
  const Workload& w = s.workload;
  rep.deployment = make_deployment(s);  // the scenario's implementation profile included
  const Deployment& d = rep.deployment;
  rep.context_tokens = w.context_tokens.empty() ? P : w.context_tokens.front();
  const int64_t ctx = rep.context_tokens;
  rep.context_ratio = P > 0 ? double(ctx) / double(P) : 1.0;
  const double ratio = rep.context_ratio;
  for (const PolicyReplay& pr : res.policies) {
    ReplayRow r;
    r.rep = &pr;
    if (!rep.loop.empty()) r.loop = &rep.loop[size_t(&pr - res.policies.data())];
    r.policy = find_policy(pr.run.policy);
    ParamValues base = pr.run.params.empty() ? r.policy->defaults() : pr.run.params;
    r.params = base;
    r.measured_params = base;
    r.carried = apply_statistics(*r.policy, r.measured_params, pr.statistics, ratio);
    DesignPoint a{&d, r.policy, &base, ctx, w.output_tokens, w.batch};
    r.analytical = evaluate(a);
    DesignPoint m{&d, r.policy, &r.measured_params, ctx, w.output_tokens, w.batch};
    r.measured = evaluate(m);
    rep.rows.push_back(std::move(r));
  }
  rep.context_note = "simulated at the scenario's context " + std::to_string(ctx) + " tokens (the trace's prompt has " +
                     std::to_string(P) + "); statistics carried from the trace's model " + rep.meta.model.name +
                     " to " + s.model.name + ": ratios, rates and text-shape means as is, token counts x " +
                     fmt("%.4g", ratio) + " (docs/replay.md)";
}

}  // namespace

std::unique_ptr<ReplayReport> run_replay_request(const ReplayRequest& c) {
  auto rep = std::make_unique<ReplayReport>();
  rep->request = c;
  auto report = [&](const std::string& stage, double f) {
    if (c.progress) c.progress(stage, f);
  };
  const std::vector<std::string> names = replay_policies(c);
  auto trace = TraceFile::open(c.trace);
  Overrides o;
  o.policies = names;
  o.keep_scenario_params = true;  // each policy as the scenario sets it, then --set on top
  o.sets = c.sets;
  rep->scenario = load_scenario_file(c.scenario.empty() ? library_dir() + "/default.yaml" : c.scenario,
                                     policy_catalog(), o);
  Scenario& s = rep->scenario;

  const int64_t P = trace->meta().prompt_tokens;
  const std::vector<PolicyRun> runs = policy_runs(s, c, P);
  find_needle_and_answer(c, *trace, P, *rep);

  const TraceData data = load_trace_data(*trace, c.memory_limit_gib * kGiB, c.trace);
  rep->meta = trace->meta();
  rep->tokens = data.T;
  rep->layers = data.layers;
  rep->kv_heads = data.kv_heads;
  rep->query_heads = data.q_heads;
  rep->head_dim = data.d;
  ReplayOptions ro;
  ro.focus_tokens = rep->needle_tokens;
  ro.topk = c.topk;
  ro.max_steps = c.max_steps;
  ro.threads = c.threads;
  ro.block_rows = c.block_rows;
  ro.host = &kernels::host_backend_named(c.kernels);
  ro.attention_kernel = c.kernels == "reference";
  std::unique_ptr<kernels::Backend> device;
  if (c.device == "cuda") {
    device = kernels::make_cuda_backend(&rep->device_note);
    ro.device = device.get();
  }
  {
    const std::string stage = "replaying " + std::filesystem::path(c.trace).filename().string();
    ro.progress = [&](double f) { report(stage, f); };
    rep->result = run_replay(data, runs, ro);
    report(stage, 1.0);
  }

  // Model in the loop: the trace's text decoded by the real model with each policy's attention.
  if (!c.model_in_the_loop.empty()) {
    if (std::error_code ec; !std::filesystem::exists(c.model_in_the_loop, ec))
      throw_input_error("command line", 0, "--model-in-the-loop", "file '" + c.model_in_the_loop + "' does not exist");
    const llm::LlamaModel model(c.model_in_the_loop);
    const std::string stage = "decoding with " + std::filesystem::path(c.model_in_the_loop).filename().string();
    rep->loop = run_model_in_the_loop(model, c.model_in_the_loop, data, runs, c.max_steps,
                                      c.threads > 0 ? c.threads : int(std::max(1u, std::thread::hardware_concurrency())),
                                      [&](double f) { report(stage, f); });
    report(stage, 1.0);
  }
  simulate_rows(*rep);
  return rep;
}

namespace {

// true when greedy decoding with the policy agreed with full attention at every step up to the answer's end.
bool retrieved(const ModelLoopResult& l, int64_t answer_end_step) {
  return l.first_disagreement < 0 || l.first_disagreement > answer_end_step;
}

// One policy's object of the `kvsim.replay/1` JSON.
json policy_json(const ReplayReport& rep, const ReplayRow& r) {
  const ReplayRequest& c = rep.request;
  const TraceMeta& tm = rep.meta;
  const int64_t answer_end_step = rep.answer_end_step;
  const PolicyReplay& pr = *r.rep;
  json pj = {{"policy", pr.run.policy}, {"label", pr.run.label}, {"params", params_json(*r.policy, r.params)}};
  pj["quality"] = quality_json(pr.overall);
  json pl = json::array();
  for (size_t l = 0; l < pr.per_layer.size(); ++l) {
    json q = quality_json(pr.per_layer[l]);
    q["layer"] = tm.layers[l];
    pl.push_back(q);
  }
  pj["per_layer"] = pl;
  json rg = json::array();
  for (size_t k = 0; k < pr.per_range.size(); ++k) {
    json q = quality_json(pr.per_range[k]);
    q["decode_rows"] = {pr.ranges[k].first, pr.ranges[k].second};
    rg.push_back(q);
  }
  pj["per_step_range"] = rg;
  json st = json::object();
  for (const auto& [k, v] : pr.statistics) st[k] = {{"value", v.value}, {"samples", v.samples}, {"doc", v.doc}};
  pj["statistics"] = st;
  json ca = json::array();
  for (const CarriedStatistic& cs : r.carried)
    ca.push_back({{"param", cs.param}, {"analytical", cs.analytical}, {"measured", cs.measured},
                  {"applied", cs.applied}, {"rule", rule_text(cs.rule)}, {"samples", cs.samples}});
  pj["carried"] = ca;
  pj["select_s"] = pr.select_seconds;
  pj["prefill_s"] = pr.prefill_seconds;
  if (r.loop)
    pj["model_in_the_loop"] = {{"model", c.model_in_the_loop},    {"steps", r.loop->steps},
                               {"next_token_agreement", r.loop->agreement}, {"nll_full", r.loop->nll_full},
                               {"nll_policy", r.loop->nll_policy}, {"nll_change", r.loop->nll_change},
                               {"first_disagreement_step", r.loop->first_disagreement},
                               {"answer_retrieved", answer_end_step < 0 ? json(nullptr) : json(retrieved(*r.loop, answer_end_step))}};
  else
    pj["model_in_the_loop"] = nullptr;
  if (pr.device) pj["device_check"] = device_check_json(*pr.device);
  json an = plan_json_of(r.analytical), me = plan_json_of(r.measured);
  pj["plan"] = {{"analytical", an}, {"measured", me}};
  if (r.analytical.feasible && r.measured.feasible)
    pj["plan"]["tpot_change"] = r.measured.tpot_s / r.analytical.tpot_s - 1.0;
  return pj;
}

// `--format json`: the `kvsim.replay/1` document (docs/replay.md).
std::string replay_json(const ReplayReport& rep) {
  const ReplayRequest& c = rep.request;
  const Scenario& s = rep.scenario;
  const Workload& w = s.workload;
  const TraceMeta& tm = rep.meta;
  const ReplayResult& res = rep.result;
  const std::vector<ReplayRow>& rows = rep.rows;
  const std::vector<int32_t>& needle_tokens = rep.needle_tokens;
  const int64_t answer_end_step = rep.answer_end_step;
  const int64_t P = tm.prompt_tokens, ctx = rep.context_tokens;
  const double ratio = rep.context_ratio;
  const std::string& context_note = rep.context_note;
  std::string text;
  json j;
  j["schema"] = "kvsim.replay/1";
  j["trace"] = {{"path", c.trace},
                {"model", tm.model.name},
                {"tokens", rep.tokens},
                {"prompt_tokens", P},
                {"decode_rows", res.decode_rows},
                {"layers", rep.layers},
                {"kv_heads", rep.kv_heads},
                {"query_heads", rep.query_heads},
                {"head_dim", rep.head_dim},
                {"values", res.has_values}};
  j["scenario"] = {{"file", s.file},
                   {"hardware", s.gpu.name},
                   {"model", s.model.name},
                   {"context_tokens", ctx},
                   {"output_tokens", w.output_tokens},
                   {"context_ratio", ratio},
                   {"note", context_note}};
  j["options"] = {{"topk", c.topk}, {"max_steps", c.max_steps}, {"block_rows", c.block_rows}, {"threads", res.threads},
                  {"budget_sweep", c.budget_sweep}, {"kernels", c.kernels}};
  if (!needle_tokens.empty())
    j["needle"] = {{"text", c.needle.empty() ? json(nullptr) : json(c.needle)},
                   {"tokens", {needle_tokens.front(), needle_tokens.back() + 1}}};
  if (!c.answer.empty()) j["answer"] = {{"text", c.answer}, {"last_step", answer_end_step}};
  j["performance"] = {{"wall_s", res.wall_seconds},
                      {"prefill_wall_s", res.prefill_wall_seconds},
                      {"select_wall_s", res.select_wall_seconds},
                      {"metrics_wall_s", res.metrics_wall_seconds},
                      {"threads", res.threads},
                      {"ground_truth_flops", res.gt_flops},
                      {"ground_truth_thread_s", res.gt_thread_seconds},
                      {"ground_truth_flops_per_core", res.gt_flops_per_core()},
                      {"sgemm_peak_flops_per_core", res.sgemm_peak_flops},
                      {"fraction_of_sgemm_peak", res.gt_fraction_of_peak()},
                      {"metrics_thread_s", res.metric_thread_seconds}};
  const bool on_device = !res.policies.empty() && res.policies.front().device;
  if (on_device)
    j["device"] = device_json(res.policies.front().device->backend, rep.device_note,
                              res.policies.front().device->timing_meaningful);
  json pols = json::array();
  for (const ReplayRow& r : rows) pols.push_back(policy_json(rep, r));
  j["policies"] = pols;
  text = j.dump(2) + "\n";
  return text;
}

// `--format csv`: one row per policy run.
std::string replay_csv(const ReplayReport& rep) {
  const ReplayResult& res = rep.result;
  const std::vector<ReplayRow>& rows = rep.rows;
  const int64_t answer_end_step = rep.answer_end_step;
  std::string text;
  text = "label,policy,recall_mean,recall_p10,error_mean,error_p90,topk_recall,tokens_mean,tpot_analytical_s,"
         "tpot_measured_s,throughput_measured_tok_s,kv_hbm_bytes,carried,next_token_agreement,nll_change,needle_recall,"
         "answer_retrieved";
  const bool on_device = !res.policies.empty() && res.policies.front().device;
  text += (on_device ? device_csv_header() : "") + "\n";
  for (const ReplayRow& r : rows) {
    const Quality& q = r.rep->overall;
    std::string carried;
    for (const CarriedStatistic& cs : r.carried) carried += (carried.empty() ? "" : ";") + cs.param;
    auto num = [](double x) { return fmt("%.9g", x); };
    text += r.rep->run.label + "," + r.rep->run.policy + "," + num(q.recall.mean) + "," + num(q.recall.p10) + "," +
            (q.error ? num(q.error->mean) : "") + "," + (q.error ? num(q.error->p90) : "") + "," +
            num(q.topk_recall.mean) + "," + num(q.tokens.mean) + "," +
            (r.analytical.feasible ? num(r.analytical.tpot_s) : "") + "," +
            (r.measured.feasible ? num(r.measured.tpot_s) : "") + "," +
            (r.measured.feasible ? num(r.measured.throughput_tok_s) : "") + "," +
            (r.measured.feasible ? num(r.measured.memory.kv_hbm_bytes) : "") + "," + carried + "," +
            (r.loop ? num(r.loop->agreement) : "") + "," + (r.loop ? num(r.loop->nll_change) : "") + "," +
            (q.focus ? num(q.focus->mean) : "") + "," +
            (r.loop && answer_end_step >= 0 ? (retrieved(*r.loop, answer_end_step) ? "1" : "0") : "") +
            (r.rep->device ? device_csv_fields(*r.rep->device) : "") + "\n";
  }
  return text;
}

// The model-in-the-loop part of the table: agreement and NLL per policy, and whether the answer survived.
std::string model_loop_table(const ReplayReport& rep) {
  const ReplayRequest& c = rep.request;
  const std::vector<ReplayRow>& rows = rep.rows;
  const int64_t answer_end_step = rep.answer_end_step;
  char buf[512];
  std::string text;
  text += "model in the loop: " + c.model_in_the_loop + " (teacher-forced trace tokens; versus full attention)\n";
  std::snprintf(buf, sizeof buf, "%-16s %6s %10s %10s %10s %10s %10s%s\n", "policy", "steps", "agreement", "NLL full",
                "NLL policy", "NLL change", "1st diff", answer_end_step >= 0 ? "  answer" : "");
  text += buf;
  for (const ReplayRow& r : rows) {
    std::snprintf(buf, sizeof buf, "%-16s %6lld %10.4f %10.4f %10.4f %+10.4f %10s%s\n", r.rep->run.label.c_str(),
                  (long long)r.loop->steps, r.loop->agreement, r.loop->nll_full, r.loop->nll_policy,
                  r.loop->nll_change,
                  r.loop->first_disagreement < 0 ? "-" : std::to_string(r.loop->first_disagreement).c_str(),
                  answer_end_step < 0 ? "" : retrieved(*r.loop, answer_end_step) ? "  retrieved" : "  lost");
    text += buf;
  }
  if (answer_end_step >= 0)
    text += "answer '" + c.answer + "' is complete after step " + std::to_string(answer_end_step) +
            ": retrieved = greedy decoding with the policy agrees with full attention at every step up to it\n";
  return text;
}

// The table (the default format).
std::string replay_table(const ReplayReport& rep) {
  const ReplayRequest& c = rep.request;
  const Scenario& s = rep.scenario;
  const TraceMeta& tm = rep.meta;
  const ReplayResult& res = rep.result;
  const std::vector<ReplayRow>& rows = rep.rows;
  const std::vector<int32_t>& needle_tokens = rep.needle_tokens;
  const int64_t P = tm.prompt_tokens;
  const std::string& context_note = rep.context_note;
  std::string text;
  char buf[512];
  std::snprintf(buf, sizeof buf, "trace:    %s: %s, %lld tokens (prompt %lld), %lld decode rows replayed, %d layers x %d KV heads x %d query heads%s\n",
                c.trace.c_str(), tm.model.name.c_str(), (long long)rep.tokens, (long long)P, (long long)res.decode_rows,
                rep.layers, rep.kv_heads, rep.query_heads, res.has_values ? "" : " (no values: output error n/a)");
  text += buf;
  std::snprintf(buf, sizeof buf, "scenario: %s: %s on %s, %s\n", s.file.c_str(), s.model.name.c_str(), s.gpu.name.c_str(),
                context_note.c_str());
  text += buf;
  std::snprintf(buf, sizeof buf,
                "%-16s %7s %7s %8s %8s %6s %8s%s | %10s %10s %7s %10s %9s  %s\n", "policy", "recall", "rec.p10",
                "err", "err.p90", "top-k", "tokens", needle_tokens.empty() ? "" : "  needle", "TPOT an.ms",
                "TPOT me.ms", "change", "tok/s", "KV GiB", "carried (measured -> applied)");
  text += buf;
  for (const ReplayRow& r : rows) {
    const Quality& q = r.rep->overall;
    std::string carried;
    for (const CarriedStatistic& cs : r.carried)
      carried += (carried.empty() ? "" : ", ") + cs.param + " " + fmt("%.4g", cs.measured) + " -> " +
                 fmt("%.4g", cs.applied) + (cs.rule == CarryRule::as_is ? "" : " (x context)");
    if (carried.empty()) carried = "-";
    const bool both = r.analytical.feasible && r.measured.feasible;
    std::snprintf(buf, sizeof buf, "%-16s %7.4f %7.4f %8s %8s %6.3f %8.1f%s | %10s %10s %7s %10s %9s  %s\n",
                  r.rep->run.label.c_str(), q.recall.mean, q.recall.p10,
                  q.error ? fmt("%.4f", q.error->mean).c_str() : "n/a",
                  q.error ? fmt("%.4f", q.error->p90).c_str() : "n/a", q.topk_recall.mean, q.tokens.mean,
                  q.focus ? fmt("%8.3f", q.focus->mean).c_str() : "",
                  tpot_text(r.analytical).c_str(), tpot_text(r.measured).c_str(),
                  both ? fmt("%+.1f%%", 100 * (r.measured.tpot_s / r.analytical.tpot_s - 1)).c_str() : "-",
                  r.measured.feasible ? fmt("%.0f", r.measured.throughput_tok_s).c_str() : "-",
                  r.measured.feasible ? fmt("%.2f", r.measured.memory.kv_hbm_bytes / kGiB).c_str() : "-",
                  carried.c_str());
    text += buf;
  }
  {
    std::vector<const PolicyReplay*> reps;
    for (const ReplayRow& r : rows) reps.push_back(r.rep);
    text += device_table(reps, rep.device_note);
  }
  if (!rep.loop.empty()) text += model_loop_table(rep);
  std::snprintf(buf, sizeof buf,
                "replay:   %.2f s wall, %d threads; ground truth %.2f GFLOP at %.1f GFLOP/s per core = %.0f%% of "
                "this build's SGEMM peak (%.1f GFLOP/s, 1024^3, same run)\n",
                res.wall_seconds, res.threads, res.gt_flops / 1e9, res.gt_flops_per_core() / 1e9,
                100 * res.gt_fraction_of_peak(), res.sgemm_peak_flops / 1e9);
  text += buf;
  return text;
}

}  // namespace

std::string replay_report_text(const ReplayReport& rep, const std::string& format) {
  if (format == "json") return replay_json(rep);
  if (format == "csv") return replay_csv(rep);
  return replay_table(rep);
}

nlohmann::json replay_timeline_json(const ReplayReport& rep) {
  std::vector<TimelineStep> steps;
  for (const ReplayRow& row : rep.rows)
    steps.push_back({&row.measured, row.rep->run.label + " decode step (measured statistics)"});
  return decode_timeline_json(rep.deployment, steps);
}

}  // namespace kvsim::replay
