#include "sweep/quality_source.hpp"

#include <yaml-cpp/yaml.h>

#include <cmath>
#include <algorithm>
#include <filesystem>

#include "core/error.hpp"
#include "core/format.hpp"
#include "model/library.hpp"
#include "replay/replay.hpp"
#include "traces/synthetic/synthetic.hpp"

namespace kvsim::sweep {

namespace fs = std::filesystem;

const char* kind_name(QualitySource::Kind k) {
  switch (k) {
    case QualitySource::Kind::real: return "real";
    case QualitySource::Kind::fitted: return "fitted";
    case QualitySource::Kind::preset: return "preset";
  }
  return "?";
}

namespace {

bool is_yaml(const fs::path& p) { return p.extension() == ".yaml" || p.extension() == ".yml"; }

// A fitted config's provenance, from its `fit:` block (`kvsim trace fit`): the real traces it was
// fitted on, its worst residual there, and how it held where it was not fitted, when the block says.
std::string fit_text(const YAML::Node& fit) {
  std::string t;
  double worst = -1;
  std::string worst_stat;
  if (const YAML::Node srcs = fit["sources"]; srcs && srcs.IsSequence())
    for (const YAML::Node& src : srcs) {
      t += (t.empty() ? "fit on " : ", ") + src["file"].as<std::string>("?");
      if (src["tokens"]) t += " (" + src["tokens"].as<std::string>() + " tokens)";
      if (const YAML::Node res = src["residuals"]; res && res.IsSequence())
        for (const YAML::Node& r : res)
          if (r["relative_error"] && std::abs(r["relative_error"].as<double>()) > worst)
            worst = std::abs(r["relative_error"].as<double>()), worst_stat = r["statistic"].as<std::string>("?");
    }
  if (worst >= 0) t += "; largest fit residual " + fmt("%.0f", 100 * worst) + "% (" + worst_stat + ")";
  if (const YAML::Node v = fit["validation"]; v && v.IsScalar()) t += "; validation: " + v.as<std::string>();
  return t.empty() ? "fitted to a real trace" : t;
}

// Stored layers that keep a replay within `limit`: every layer when it fits, else evenly spaced ones.
// A replay's bytes are per stored layer (keys, values, queries), so one measurement sizes them all.
void fit_in_memory(SyntheticConfig& c, double limit, std::string& note) {
  const int all = c.store_layers.empty() ? c.layers : int(c.store_layers.size());
  const double per_layer = replay::trace_data_bytes(SyntheticTrace(c)) / all;
  const int keep = std::clamp(int(limit / per_layer), 1, all);  // one layer at least: load_trace_data names
                                                                 // the bytes and the limit if even that is too much
  if (keep == all) return;
  c.store_layers.clear();
  for (int i = 0; i < keep; ++i) c.store_layers.push_back(keep == 1 ? c.layers / 2 : i * (c.layers - 1) / (keep - 1));
  note = ", " + std::to_string(keep) + " of " + std::to_string(c.layers) + " layers (memory limit)";
}

}  // namespace

QualitySource resolve_quality_source(const std::string& arg, int64_t prompt_tokens, double memory_limit_bytes,
                                     const std::string& option) {
  QualitySource q;
  q.name = arg;
  const fs::path p(arg);
  if (fs::exists(p) && !is_yaml(p)) {
    if (!fs::is_regular_file(p))
      throw_input_error("command line", 0, option, "'" + arg + "' is not a file; allowed: a trace file (.safetensors), a "
                        "synthetic preset name or a synthetic config YAML");
    q.kind = QualitySource::Kind::real;
    q.description = "real trace " + arg;
    return q;
  }
  if ((is_yaml(p) && !fs::exists(p)) || (!is_yaml(p) && arg.find('/') != std::string::npos))
    throw_input_error("command line", 0, option, "file '" + arg + "' does not exist; allowed: a trace file "
                      "(.safetensors), a synthetic preset name (scenarios/traces/) or a synthetic config YAML");
  // A synthetic configuration (load_synthetic_config names the preset's candidates or the file's errors).
  // Loaded twice: first for its decode length and question window, then at the workload's length, so
  // that a fitted config's scaling rules apply at that length (`kvsim trace gen --tokens`).
  const SyntheticConfig as_written = load_synthetic_config(arg);
  const std::vector<std::pair<std::string, std::string>> window{
      {"obs_window", std::to_string(std::min(as_written.obs_window, prompt_tokens))}};
  SyntheticConfig c = load_synthetic_config(arg, window, prompt_tokens + as_written.generated_tokens);
  std::string fit;
  const std::string file = resolve(LibraryKind::trace, arg, "", 0, "trace preset");
  if (const YAML::Node doc = YAML::LoadFile(file); doc["fit"]) fit = fit_text(doc["fit"]);
  std::string memory_note;
  fit_in_memory(c, memory_limit_bytes, memory_note);
  const std::string length = " generated at " + std::to_string(c.prompt_tokens) + " prompt + " +
                             std::to_string(c.generated_tokens) + " decode tokens" + memory_note;
  if (!fit.empty()) {
    q.kind = QualitySource::Kind::fitted;
    q.description = "fitted synthetic " + arg + length + " (" + fit + ")";
  } else {
    q.kind = QualitySource::Kind::preset;
    q.description = "synthetic " + arg + length +
                    " -- uncalibrated: a hand-set generator, not fitted to a real trace (kvsim trace fit); "
                    "its queries are more alike than a real model's, so budgets sized on it are optimistic for "
                    "query-locality policies";
  }
  q.synthetic = std::make_shared<const SyntheticConfig>(std::move(c));
  return q;
}

}  // namespace kvsim::sweep
