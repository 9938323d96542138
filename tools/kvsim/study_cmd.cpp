#include "tools/kvsim/study_cmd.hpp"

#include <cstdio>
#include <nlohmann/json.hpp>

#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "model/policy.hpp"
#include "model/scenario.hpp"
#include "core/units.hpp"
#include "replay/studies.hpp"
#include "traces/format/trace_file.hpp"
#include "policies/registry.hpp"
#include "core/format.hpp"

namespace kvsim {

struct StudyCommand {
  CLI::App *cmd = nullptr, *qsim = nullptr, *overlap = nullptr, *jaccard = nullptr;
  std::string trace, format = "table", out;
  double threshold = 0.8, topk_fraction = 0.05, budget_ratio = 0.1, memory_limit_gib = 8;
  int pairs = 64;
  uint64_t seed = 1;
  std::vector<std::string> policies{"chunkkv", "snapkv"}, sets;
};

namespace {

using json = nlohmann::json;
using namespace replay;

void common(CLI::App* a, StudyCommand& c) {
  a->add_option("trace", c.trace, "trace file or shard directory")->required();
  a->add_option("--format", c.format, "output format")->check(CLI::IsMember({"table", "json", "csv"}));
  a->add_option("-o,--out", c.out, "write to FILE (atomically) instead of standard output");
  a->add_option("--memory-limit", c.memory_limit_gib, "GiB the float32 trace may take in memory (default 8)")
      ->check(CLI::PositiveNumber);
}

std::string query_similarity_text(const StudyCommand& c, const TraceData& t) {
  const QuerySimilarity r = query_similarity(t, c.threshold);
  if (c.format == "json") {
    json bins = json::array();
    for (const DistanceBin& b : r.bins)
      bins.push_back({{"distance", {b.lo, b.hi}}, {"pairs", b.pairs}, {"mean_cosine", b.mean},
                      {"layer_min", b.layer_min}, {"layer_max", b.layer_max}, {"share_above", b.share_above}});
    return json{{"schema", "kvsim.study.query_similarity/1"}, {"trace", c.trace}, {"query_rows", r.rows},
                {"threshold", r.threshold}, {"bins", bins}}.dump(2) + "\n";
  }
  std::string s = c.format == "csv" ? "distance_lo,distance_hi,pairs,mean_cosine,layer_min,layer_max,share_above\n"
                                    : "CTKVR Obs. 1: query cosine against position distance (" + std::to_string(r.rows) +
                                          " query rows, every stored layer and query head)\n" +
                                          "distance      pairs    mean cos  layer min  layer max  share > " +
                                          fmt("%.2f", r.threshold) + "\n";
  for (const DistanceBin& b : r.bins) {
    if (c.format == "csv")
      s += std::to_string(b.lo) + "," + std::to_string(b.hi) + "," + std::to_string(b.pairs) + "," +
           fmt("%.6g", b.mean) + "," + fmt("%.6g", b.layer_min) + "," + fmt("%.6g", b.layer_max) + "," +
           fmt("%.6g", b.share_above) + "\n";
    else {
      char buf[160];
      std::snprintf(buf, sizeof buf, "%5lld-%-6lld %10lld %10.3f %10.3f %10.3f %10.3f\n", (long long)b.lo,
                    (long long)b.hi - 1, (long long)b.pairs, b.mean, b.layer_min, b.layer_max, b.share_above);
      s += buf;
    }
  }
  return s;
}

std::string topk_overlap_text(const StudyCommand& c, const TraceData& t) {
  const TopkOverlap r = topk_overlap(t, c.topk_fraction, c.pairs, c.seed);
  if (c.format == "json") {
    json bins = json::array();
    for (const CosineBin& b : r.bins)
      bins.push_back({{"cosine", {b.lo, b.hi}}, {"pairs", b.pairs}, {"mean_overlap", b.mean_overlap}});
    return json{{"schema", "kvsim.study.topk_overlap/1"}, {"trace", c.trace}, {"topk_fraction", r.topk_fraction},
                {"pairs", r.pairs}, {"pearson", r.pearson}, {"slope", r.slope}, {"intercept", r.intercept},
                {"seed", c.seed}, {"bins", bins}}.dump(2) + "\n";
  }
  std::string s;
  if (c.format == "csv") {
    s = "cosine_lo,cosine_hi,pairs,mean_overlap\n";
    for (const CosineBin& b : r.bins)
      s += fmt("%.1f", b.lo) + "," + fmt("%.1f", b.hi) + "," + std::to_string(b.pairs) + "," +
           fmt("%.6g", b.mean_overlap) + "\n";
    return s;
  }
  s = "CTKVR Obs. 2: top-k overlap against query cosine (k = " + fmt("%.3g", 100 * r.topk_fraction) +
      "% of the keys both queries see; " + std::to_string(r.pairs) + " random pairs, seed " + std::to_string(c.seed) +
      ")\ncosine          pairs  mean overlap\n";
  for (const CosineBin& b : r.bins) {
    if (b.pairs == 0) continue;
    char buf[128];
    std::snprintf(buf, sizeof buf, "[%+.1f, %+.1f) %9lld %12.3f\n", b.lo, b.hi, (long long)b.pairs, b.mean_overlap);
    s += buf;
  }
  s += "Pearson r = " + fmt("%.3f", r.pearson) + "; trend line overlap = " + fmt("%.3f", r.slope) + " cos " +
       fmt("%+.3f", r.intercept) + "\n";
  return s;
}

std::string layer_jaccard_text(const StudyCommand& c, const TraceData& t) {
  std::vector<PolicyChoice> choices;
  for (const std::string& n : c.policies) {
    const Policy* p = find_policy(n);
    if (!p) throw_input_error("command line", 0, "--policy", "unknown policy '" + n + "'; known: " + join(policy_names()));
    if (!has_selector(n)) throw_input_error("command line", 0, "--policy", "policy '" + n + "' has no trace selector");
    ParamValues v = p->defaults();
    // One budget for every policy (tokens kept per layer and KV head); ChunkKV's reuse off, since reused
    // layers are identical by construction and the study asks whether reuse is justified.
    const int ib = p->param_index("budget_tokens");
    if (ib >= 0) v[size_t(ib)] = std::max(1.0, std::floor(c.budget_ratio * double(t.P)));
    const int ir = p->param_index("reuse_layers");
    if (ir >= 0) v[size_t(ir)] = 1;
    choices.push_back({p, v});
  }
  for (const std::string& s : c.sets) apply_set(s, choices);
  std::vector<PolicyRun> runs;
  for (const PolicyChoice& pc : choices) runs.push_back({std::string(pc.policy->name()), pc.params, std::string(pc.policy->name())});
  const std::vector<LayerJaccard> r = layer_jaccard(t, runs);
  const std::vector<int>& layers = t.source->meta().layers;
  if (c.format == "json") {
    json pols = json::array();
    for (const LayerJaccard& j : r)
      pols.push_back({{"policy", j.label}, {"mean", j.mean}, {"mean_first_kv_head", j.mean_first_head},
                      {"kept_tokens", j.kept_tokens}, {"per_adjacent_pair", j.per_pair},
                      {"per_adjacent_pair_first_kv_head", j.first_head}});
    return json{{"schema", "kvsim.study.layer_jaccard/1"}, {"trace", c.trace}, {"layers", layers},
                {"budget_ratio", c.budget_ratio}, {"policies", pols}}.dump(2) + "\n";
  }
  std::string s;
  if (c.format == "csv") {
    s = "policy,layer,next_layer,jaccard,jaccard_first_kv_head\n";
    for (const LayerJaccard& j : r)
      for (size_t l = 0; l < j.per_pair.size(); ++l)
        s += j.label + "," + std::to_string(layers[l]) + "," + std::to_string(layers[l + 1]) + "," +
             fmt("%.6g", j.per_pair[l]) + "," + fmt("%.6g", j.first_head[l]) + "\n";
    return s;
  }
  s = "ChunkKV Table 3: Jaccard similarity of kept token indices in adjacent stored layers (first decode row; budget " +
      fmt("%.3g", 100 * c.budget_ratio) + "% of the " + std::to_string(t.P) + "-token prompt; reuse off)\n";
  s += "policy        kept tokens  mean Jaccard  first KV head\n";
  for (const LayerJaccard& j : r) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "%-12s %12.1f %13.3f %14.3f\n", j.label.c_str(), j.kept_tokens, j.mean, j.mean_first_head);
    s += buf;
  }
  return s;
}

}  // namespace

StudyCommand* add_study_command(CLI::App& app) {
  static StudyCommand c;
  c.cmd = app.add_subcommand("study", "test a seed paper's premise on a trace (docs/findings.md)");
  c.cmd->require_subcommand(1);
  c.qsim = c.cmd->add_subcommand("query-similarity", "CTKVR Obs. 1: query cosine against position distance");
  common(c.qsim, c);
  c.qsim->add_option("--threshold", c.threshold, "report the share of pairs above this cosine (default 0.8)")
      ->check(CLI::Range(-1.0, 1.0));
  c.overlap = c.cmd->add_subcommand("topk-overlap", "CTKVR Obs. 2: top-k key overlap against query cosine");
  common(c.overlap, c);
  c.overlap->add_option("--topk-fraction", c.topk_fraction, "k as a fraction of the keys both queries see (default 0.05)")
      ->check(CLI::Range(1e-6, 1.0));
  c.overlap->add_option("--pairs", c.pairs, "random query pairs per stored layer and query head (default 64)")
      ->check(CLI::Range(1, 1 << 20));
  c.overlap->add_option("--seed", c.seed, "seed of the pair sampling (default 1)");
  c.jaccard = c.cmd->add_subcommand("layer-jaccard", "ChunkKV Table 3: adjacent-layer Jaccard of kept indices");
  common(c.jaccard, c);
  c.jaccard->add_option("--policy", c.policies, "policies to compare (default: chunkkv snapkv)");
  c.jaccard->add_option("--budget-ratio", c.budget_ratio, "tokens kept as a fraction of the prompt (default 0.1)")
      ->check(CLI::Range(1e-6, 1.0));
  c.jaccard->add_option("--set", c.sets, "POLICY.PARAM=VALUE (repeatable), after the budget");
  return &c;
}

int run_study_command(StudyCommand& c) {
  if (!c.cmd->parsed()) return -1;
  auto trace = TraceFile::open(c.trace);
  const replay::TraceData t = replay::load_trace_data(*trace, c.memory_limit_gib * kGiB, c.trace);
  std::string text;
  if (c.qsim->parsed()) text = query_similarity_text(c, t);
  else if (c.overlap->parsed()) text = topk_overlap_text(c, t);
  else text = layer_jaccard_text(c, t);
  if (c.out.empty()) std::fwrite(text.data(), 1, text.size(), stdout);
  else write_file_atomic(c.out, text);
  return 0;
}

}  // namespace kvsim
