// `kvsim trace info` as data: a trace's model, stored layers and heads, lengths, sizes, provenance and
// (optionally) its structural profile, as the JSON document `kvsim trace info --format json` prints
// (schema kvsim.trace_info/1) and the Python module returns.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "traces/format/profile.hpp"
#include "traces/format/trace.hpp"

namespace kvsim {

// Bytes of a trace on disk: the file, or the .safetensors files of a shard directory.
double bytes_on_disk(const std::string& path);

// `prof` null: no "profile" entry.
nlohmann::json info_json(const std::string& path, const TraceSource& t, const TraceProfile* prof);

}  // namespace kvsim
