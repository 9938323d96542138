// What `kvsim trace fit` writes: the fitted config as YAML (with its `fit:` provenance), and the
// residuals as a table or JSON. Numbers are printed with %.6g so the same fit gives the same bytes.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "traces/synthetic/fit.hpp"

namespace kvsim {

namespace {

std::string num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

std::string quoted(const std::string& s) { return nlohmann::json(s).dump(); }

template <class T>
std::string list(const std::vector<T>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + num(double(v[i]));
  return s + "]";
}

const char* kRule = "retrieval head: more than a quarter of its decode attention outside the first 4 tokens and the last 64";

std::string group_line(const LayerGroup& g) {
  std::string s = "  - {layers: [" + std::to_string(g.first) + ", " + std::to_string(g.last) + "]";
  for (const auto& [k, v] : g.knobs) s += ", " + k + ": " + num(v);
  return s + "}\n";
}

std::string provenance(const std::vector<TraceFitResult>& fits, const FitOptions& o) {
  std::string s = "fit:\n  seed: " + std::to_string(o.seed) + "\n  groups: " + std::to_string(o.groups) +
                  "\n  classification: " + quoted(kRule) + "\n  sources:\n";
  for (const TraceFitResult& f : fits) {
    s += "    - file: " + quoted(f.source) + "\n      tokens: " + std::to_string(f.tokens) +
         "\n      prompt_tokens: " + std::to_string(f.prompt_tokens) + "\n      decode_queries: " +
         std::to_string(f.decode_queries) + "\n      groups:\n";
    for (const GroupFit& g : f.groups) {
      s += "        - {layers: [" + std::to_string(g.first) + ", " + std::to_string(g.last) + "], heads: " +
           std::to_string(g.heads) + ", retrieval: " + std::to_string(g.retrieval) + ", evaluations: " +
           std::to_string(g.evaluations) + "}\n";
    }
    s += "      residuals:\n";
    for (const FitStat& r : f.residuals)
      s += "        - {statistic: " + r.name + ", real: " + num(r.real) + ", fitted: " + num(r.fitted) +
           ", relative_error: " + num(r.relative_error()) + "}\n";
  }
  return s;
}

}  // namespace

std::string fit_yaml(const std::vector<TraceFitResult>& fits, const FitOptions& o) {
  const TraceFitResult& ref = fits.back();
  const SyntheticConfig& c = ref.config;
  std::string s =
      "# Synthetic trace generator config fitted to a real trace by `kvsim trace fit` (docs/synthetic-traces.md,\n"
      "# \"Fitting to a real trace\"). Generate with: kvsim trace gen --config THIS.yaml [--tokens N] -o OUT.safetensors\n";
  s += "description: " + quoted("fitted to " + ref.source + " (" + std::to_string(ref.tokens) + " tokens)") + "\n";
  s += "model_name: " + quoted(c.model_name) + "\n";
  s += "layers: " + std::to_string(c.layers) + "\nheads: " + std::to_string(c.heads) + "\nkv_heads: " +
       std::to_string(c.kv_heads) + "\nhead_dim: " + std::to_string(c.head_dim) + "\nrope_theta: " + num(c.rope_theta) + "\n";
  if (!c.store_layers.empty()) s += "store_layers: " + list(c.store_layers) + "\n";
  if (!c.store_kv_heads.empty()) s += "store_kv_heads: " + list(c.store_kv_heads) + "\n";
  s += "dtype: " + std::string(to_string(c.dtype)) + "\nvalues: " + (c.values ? "true" : "false") + "\n";
  s += "seed: " + std::to_string(c.seed) + "\nprompt_tokens: " + std::to_string(c.prompt_tokens) +
       "\ngenerated_tokens: " + std::to_string(c.generated_tokens) + "\nobs_window: " + std::to_string(c.obs_window) +
       "\nmean_sentence_tokens: " + num(c.mean_sentence_tokens) + "\nrecency_pairs: " + std::to_string(c.recency_pairs) + "\n";
  if (c.recency_decay) s += "recency_decay: true\n";
  if (!c.sink_topic) s += "sink_topic: false\n";
  if (!c.needles.empty()) {
    s += "# The real needle's depth and length; its strength fitted to the real needle's attention share.\n";
    s += "needles:\n";
    for (const NeedleSpec& nd : c.needles) s += "  - {depth: " + num(nd.depth) + ", length: " + std::to_string(nd.length) + "}\n";
    s += "needle_query_strength: " + num(c.needle_query_strength) + "\n";
  }
  s += "# Per layer group: retrieval_heads is the classified share; value_* are closed-form; the rest searched.\n";
  s += "layer_groups:\n";
  for (const LayerGroup& g : c.layer_groups) s += group_line(g);
  if (!c.scaling.empty()) {
    s += "# value(T) = the group's value + slope x ln(T / reference_tokens); recency_window x (T / reference)^slope;\n"
         "# 1 - query_ar x (T / reference)^slope; slope 0 = constant.\n";
    s += "scaling:\n  reference_tokens: " + std::to_string(c.scaling_reference_tokens) + "\n  rules:\n";
    for (const ScalingRule& r : c.scaling)
      s += "    - {group: " + std::to_string(r.group) + ", knob: " + r.knob + ", slope: " + num(r.slope) +
           ", tokens: " + list(r.tokens) + ", values: " + list(r.values) + "}\n";
  }
  return s + provenance(fits, o);
}

std::string fit_table(const std::vector<TraceFitResult>& fits) {
  std::string s;
  char buf[256];
  for (const TraceFitResult& f : fits) {
    std::snprintf(buf, sizeof buf, "%s: %lld tokens (%lld prompt + %lld generated), %lld decode queries\n",
                  f.source.c_str(), (long long)f.tokens, (long long)f.prompt_tokens, (long long)f.generated_tokens,
                  (long long)f.decode_queries);
    s += buf;
    for (const GroupFit& g : f.groups) {
      std::snprintf(buf, sizeof buf, "  group layers %d-%d: %d heads, %d retrieval, %d simulations:", g.first, g.last,
                    g.heads, g.retrieval, g.evaluations);
      s += buf;
      for (const auto& [k, v] : g.knobs) s += " " + k + " " + num(v);
      s += "\n    real/simulated:";
      for (const FitStat& r : g.residuals) {
        std::snprintf(buf, sizeof buf, " %s %.3f/%.3f", r.name.c_str(), r.real, r.fitted);
        s += buf;
      }
      s += "\n";
    }
    std::snprintf(buf, sizeof buf, "  %-14s %10s %10s %10s\n", "statistic", "real", "fitted", "rel. error");
    s += buf;
    for (const FitStat& r : f.residuals) {
      std::snprintf(buf, sizeof buf, "  %-14s %10.4f %10.4f %+9.1f%%\n", r.name.c_str(), r.real, r.fitted,
                    100 * r.relative_error());
      s += buf;
    }
  }
  const SyntheticConfig& c = fits.back().config;
  for (const ScalingRule& r : c.scaling)
    if (r.slope != 0) s += "scaling: group " + std::to_string(r.group) + " " + r.knob + " " + num(r.slope) + " per ln(tokens)\n";
  return s;
}

std::string fit_json(const std::vector<TraceFitResult>& fits, const FitOptions& o) {
  nlohmann::json j;
  j["schema"] = "kvsim.trace_fit/1";
  j["seed"] = o.seed;
  j["classification"] = kRule;
  for (const TraceFitResult& f : fits) {
    nlohmann::json src = {{"file", f.source}, {"tokens", f.tokens}, {"prompt_tokens", f.prompt_tokens},
                          {"decode_queries", f.decode_queries}};
    for (const GroupFit& g : f.groups) {
      nlohmann::json jg = {{"layers", {g.first, g.last}}, {"heads", g.heads}, {"retrieval", g.retrieval},
                           {"evaluations", g.evaluations}};
      for (const auto& [k, v] : g.knobs) jg["knobs"][k] = v;
      for (const FitStat& r : g.residuals) jg["residuals"].push_back({{"statistic", r.name}, {"real", r.real}, {"fitted", r.fitted}});
      src["groups"].push_back(jg);
    }
    for (const FitStat& r : f.residuals)
      src["residuals"].push_back(
          {{"statistic", r.name}, {"real", r.real}, {"fitted", r.fitted}, {"relative_error", r.relative_error()}});
    j["sources"].push_back(src);
  }
  for (const ScalingRule& r : fits.back().config.scaling)
    j["scaling"].push_back({{"group", r.group}, {"knob", r.knob}, {"slope", r.slope}, {"tokens", r.tokens}, {"values", r.values}});
  return j.dump(2);
}

}  // namespace kvsim
