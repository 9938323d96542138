#include "traces/format/trace_meta_json.hpp"

#include <algorithm>
#include <climits>
#include <limits>

#include "core/error.hpp"

namespace kvsim {

using nlohmann::json;

json trace_meta_to_json(const TraceMeta& m) {
  return json{
      {"schema", m.schema},
      {"model",
       {{"name", m.model.name},
        {"layers", m.model.layers},
        {"heads", m.model.heads},
        {"kv_heads", m.model.kv_heads},
        {"head_dim", m.model.head_dim},
        {"rope_theta", m.model.rope_theta},
        {"dtype", m.model.dtype}}},
      {"layers", m.layers},
      {"kv_heads", m.kv_heads},
      {"query_heads", m.query_heads},
      {"prompt_tokens", m.prompt_tokens},
      {"sentence_starts", m.sentence_starts},
      {"source",
       {{"kind", m.source.kind},
        {"model", m.source.model},
        {"text", m.source.text},
        {"command", m.source.command},
        {"seed", m.source.seed}}},
  };
}

namespace {

// Reads one JSON object's fields, naming each as "<prefix>.<key>" in errors.
class Reader {
 public:
  Reader(const json& j, std::string prefix, const std::string& where) : j_(j), prefix_(std::move(prefix)), where_(where) {
    if (!j.is_object())
      throw_input_error(where_, 0, prefix_, "is a JSON " + std::string(j.type_name()) + "; it must be an object");
  }

  void reject_unknown(const std::vector<std::string>& allowed) const {
    for (const auto& [k, v] : j_.items()) {
      (void)v;
      if (std::find(allowed.begin(), allowed.end(), k) == allowed.end())
        throw_input_error(where_, 0, prefix_ + "." + k,
                          "unknown key" + suggestion(k, allowed) + "; allowed: " + join(allowed));
    }
  }

  bool has(const std::string& k) const { return j_.contains(k); }

  const json& get(const std::string& k) const {
    if (!j_.contains(k)) throw_input_error(where_, 0, prefix_ + "." + k, "is missing; it is required");
    return j_.at(k);
  }

  int64_t integer(const std::string& k, int64_t lo, int64_t hi) const { return as_integer(get(k), field(k), lo, hi); }

  std::string string(const std::string& k) const {
    const json& v = get(k);
    if (!v.is_string())
      throw_input_error(where_, 0, field(k), "is " + short_dump(v) + "; it must be a string");
    return v.get<std::string>();
  }

  double number(const std::string& k) const {
    const json& v = get(k);
    if (!v.is_number()) throw_input_error(where_, 0, field(k), "is " + short_dump(v) + "; it must be a number");
    return v.get<double>();
  }

  template <typename T>
  std::vector<T> integers(const std::string& k) const {
    const json& v = get(k);
    if (!v.is_array())
      throw_input_error(where_, 0, field(k), "is " + short_dump(v) + "; it must be an array of integers");
    std::vector<T> out;
    out.reserve(v.size());
    for (size_t i = 0; i < v.size(); ++i)
      out.push_back(T(as_integer(v[i], field(k) + "[" + std::to_string(i) + "]", std::numeric_limits<T>::min(),
                                 std::numeric_limits<T>::max())));
    return out;
  }

  std::string field(const std::string& k) const { return prefix_ + "." + k; }

 private:
  const json& j_;
  std::string prefix_;
  const std::string& where_;

  static std::string short_dump(const json& v) {
    std::string s = v.dump();
    return s.size() > 60 ? s.substr(0, 57) + "..." : s;
  }

  int64_t as_integer(const json& v, const std::string& f, int64_t lo, int64_t hi) const {
    if (v.is_number_unsigned()) {
      const uint64_t u = v.get<uint64_t>();
      if (u > uint64_t(hi)) throw_input_error(where_, 0, f, "value " + v.dump() + " is larger than " + std::to_string(hi));
      return int64_t(u);
    }
    if (v.is_number_integer()) {
      const int64_t x = v.get<int64_t>();
      if (x < lo || x > hi)
        throw_input_error(where_, 0, f,
                          "value " + v.dump() + " is outside " + std::to_string(lo) + " .. " + std::to_string(hi));
      return x;
    }
    throw_input_error(where_, 0, f, "is " + short_dump(v) + "; it must be an integer");
  }
};

}  // namespace

TraceMeta trace_meta_from_json(const json& j, const std::string& where) {
  Reader r(j, "kvsim_trace", where);
  TraceMeta m;
  // The version first: a newer file's unknown keys should be reported as "newer version", not as typos.
  m.schema = int(r.integer("schema", INT_MIN, INT_MAX));
  if (m.schema != kTraceSchemaVersion)
    throw_input_error(where, 0, "kvsim_trace.schema",
                      "version " + std::to_string(m.schema) + " is not supported; this kvsim reads version " +
                          std::to_string(kTraceSchemaVersion));
  r.reject_unknown({"schema", "model", "layers", "kv_heads", "query_heads", "prompt_tokens", "sentence_starts", "source"});

  Reader mo(r.get("model"), "kvsim_trace.model", where);
  mo.reject_unknown({"name", "layers", "heads", "kv_heads", "head_dim", "rope_theta", "dtype"});
  m.model.name = mo.string("name");
  m.model.layers = int(mo.integer("layers", INT_MIN, INT_MAX));
  m.model.heads = int(mo.integer("heads", INT_MIN, INT_MAX));
  m.model.kv_heads = int(mo.integer("kv_heads", INT_MIN, INT_MAX));
  m.model.head_dim = int(mo.integer("head_dim", INT_MIN, INT_MAX));
  m.model.rope_theta = mo.number("rope_theta");
  m.model.dtype = mo.string("dtype");

  m.layers = r.integers<int>("layers");
  m.kv_heads = r.integers<int>("kv_heads");
  m.query_heads = r.integers<int>("query_heads");
  m.prompt_tokens = r.integer("prompt_tokens", INT64_MIN, INT64_MAX);
  m.sentence_starts = r.integers<int64_t>("sentence_starts");

  if (r.has("source")) {
    Reader s(r.get("source"), "kvsim_trace.source", where);
    s.reject_unknown({"kind", "model", "text", "command", "seed"});
    if (s.has("kind")) m.source.kind = s.string("kind");
    if (s.has("model")) m.source.model = s.string("model");
    if (s.has("text")) m.source.text = s.string("text");
    if (s.has("command")) m.source.command = s.string("command");
    if (s.has("seed")) m.source.seed = s.integer("seed", INT64_MIN, INT64_MAX);
  }
  return m;
}

TraceMeta parse_trace_meta(const std::string& text, const std::string& where) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    const auto* pe = dynamic_cast<const json::parse_error*>(&e);
    throw_input_error(where, 0, "__metadata__.kvsim_trace",
                      "is not valid JSON" + (pe ? " at byte " + std::to_string(pe->byte) : std::string()) + ": " +
                          e.what());
  }
  return trace_meta_from_json(j, where);
}

}  // namespace kvsim
