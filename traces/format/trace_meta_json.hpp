// TraceMeta <-> the `kvsim_trace` JSON object that a trace file stores in its safetensors
// `__metadata__` (docs/trace-format.md, "kvsim_trace"). Reading is strict: every field is type- and
// range-checked, unknown keys are errors with a did-you-mean, so a typo in a hand-written trace is
// caught instead of silently ignored. Consistency across fields is validate_trace()'s job.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "traces/format/trace.hpp"

namespace kvsim {

nlohmann::json trace_meta_to_json(const TraceMeta& m);

// `where` names the file in errors; fields are named "kvsim_trace.model.heads" and so on.
TraceMeta trace_meta_from_json(const nlohmann::json& j, const std::string& where);

// Parses the JSON text of the kvsim_trace metadata value, then trace_meta_from_json.
TraceMeta parse_trace_meta(const std::string& text, const std::string& where);

}  // namespace kvsim
