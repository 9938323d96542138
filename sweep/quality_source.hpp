// Where a quality floor's numbers come from (`--trace` of `plan --target-*` and `capacity`): a captured
// trace file, or a synthetic configuration generated at the workload's length. A synthetic one is
// either fitted to a real trace (`kvsim trace fit`; its YAML carries a `fit:` block, whose validation
// the report quotes) or set by hand (a preset, or a YAML without a fit), which nothing has calibrated
// against real attention: the report says so, since such budgets are optimistic for the policies that
// live on query locality (docs/findings.md §3).
#pragma once
#include <cstdint>
#include <memory>
#include <string>

namespace kvsim {
struct SyntheticConfig;
}

namespace kvsim::sweep {

struct QualitySource {
  enum class Kind { real, fitted, preset };
  Kind kind = Kind::real;
  std::string name;         // the file path, or the preset's name
  std::string description;  // one line for reports, e.g. "real trace smol.safetensors"
  // How to generate it (fitted, preset): the configuration at the workload's length, and the layers a
  // replay of it can hold in memory.
  std::shared_ptr<const SyntheticConfig> synthetic;
};

const char* kind_name(QualitySource::Kind k);  // "real", "fitted", "preset"

// `arg`: an existing trace file (.safetensors), or a synthetic preset name or config YAML, generated with
// `prompt_tokens` prompt tokens (the workload's longest) and at most `memory_limit_bytes` in float32
// (evenly spaced stored layers, fewer when the whole model would not fit; the description says so).
// Errors name `option` and list what is accepted.
QualitySource resolve_quality_source(const std::string& arg, int64_t prompt_tokens, double memory_limit_bytes,
                                     const std::string& option = "--trace");

}  // namespace kvsim::sweep
