#include "tools/kvsim/target_plan_cmd.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "policies/registry.hpp"
#include "core/units.hpp"
#include "sweep/quality.hpp"
#include "sweep/quality_source.hpp"
#include "sweep/target_plan.hpp"

namespace kvsim {

struct TargetOptions {
  double tpot_ms = 0, throughput = 0, min_recall = -1, max_error = -1, memory_limit_gib = 8;
  std::string trace;
  int64_t max_steps = 0;
  bool exhaustive = false;
  std::string size_at = "pessimistic";
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
  plan.add_option("--size-at", t.size_at,
                  "which end of the 80% range (docs/uncertainty.md) the target is met at: pessimistic (TPOT's "
                  "high end, throughput's low end; the default) or estimate")
      ->check(CLI::IsMember({"pessimistic", "estimate"}));
  plan.add_flag("--exhaustive", t.exhaustive, "evaluate every grid point and batch instead of searching (to check the search)");
  return &t;
}

bool target_requested(const TargetOptions& t) { return t.tpot_ms > 0 || t.throughput > 0; }

int run_target_plan(const TargetOptions& t, const Scenario& s, const std::string& format, const std::string& out) {
  sweep::TargetPlanRequest r;
  sweep::Target& target = r.target;
  target.kind = t.tpot_ms > 0 ? sweep::Target::Kind::tpot : sweep::Target::Kind::throughput;
  target.value = t.tpot_ms > 0 ? t.tpot_ms * 1e-3 : t.throughput;
  target.pessimistic = t.size_at == "pessimistic";
  if (t.min_recall >= 0) target.min_recall = t.min_recall;
  if (t.max_error >= 0) target.max_error = t.max_error;
  if (target.has_quality() && t.trace.empty())
    throw_input_error("command line", 0, t.min_recall >= 0 ? "--min-recall" : "--max-output-error",
                      "a quality floor needs --trace TRACE (quality comes from replaying it)");
  if (format != "table" && format != "json")
    throw_input_error("command line", 0, "--format", "value '" + format + "' is not allowed with a target; allowed: table, json");
  for (const std::string& k : t.knobs) sweep::add_knob(k, policy_catalog(), r.knobs);
  r.exhaustive = t.exhaustive;

  // Quality: one replay per configuration, cached across policies' searches and contexts (and on disk
  // with --quality-cache).
  // The trace: a file, or a synthetic config generated at the longest context asked about.
  sweep::TraceSettings ts;
  ts.path = t.trace;
  ts.max_steps = t.max_steps;
  ts.memory_limit_gib = t.memory_limit_gib;
  if (!t.trace.empty()) {
    const int64_t longest = *std::max_element(s.workload.context_tokens.begin(), s.workload.context_tokens.end());
    const sweep::QualitySource src = sweep::resolve_quality_source(t.trace, longest, t.memory_limit_gib * kGiB);
    ts.synthetic = src.synthetic;
    r.quality_source = src.description;
    r.quality_kind = sweep::kind_name(src.kind);
  }
  sweep::QualityCache cache(ts);
  if (!t.quality_cache.empty()) cache.use_file(t.quality_cache);
  const sweep::QualityFn quality = sweep::quality_from_trace(cache);
  if (!t.trace.empty()) r.quality = &quality;
  r.trace = t.trace;

  const std::vector<sweep::TargetPlanEntry> answers = sweep::plan_targets(s, r);
  const std::string text = format == "json" ? sweep::target_plan_json(s, r, answers) : sweep::target_plan_text(s, r, answers);
  if (out.empty()) std::fwrite(text.data(), 1, text.size(), stdout);
  else write_file_atomic(out, text);
  return 0;
}

}  // namespace kvsim
