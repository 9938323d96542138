#include "traces/format/trace.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/error.hpp"

namespace kvsim {

int TraceSource::kv_slot_of_query(int q_slot) const {
  const TraceMeta& m = meta();
  const int kv = m.query_heads.at(size_t(q_slot)) / m.model.group();
  const auto it = std::lower_bound(m.kv_heads.begin(), m.kv_heads.end(), kv);
  return (it != m.kv_heads.end() && *it == kv) ? int(it - m.kv_heads.begin()) : -1;
}

namespace {

// Limits that keep a hostile file from making us allocate or loop without bound. Real models are far
// inside them (the largest open models: 128 layers, 128 heads, head_dim 256).
constexpr int kMaxLayers = 4096, kMaxHeads = 4096, kMaxHeadDim = 4096;
constexpr int64_t kMaxTokens = int64_t(1) << 32;

template <typename T>
void check_index_list(const std::vector<T>& v, int64_t bound, const std::string& where, const std::string& field,
                      const std::string& bound_name, bool non_empty) {
  if (non_empty && v.empty()) throw_input_error(where, 0, field, "is empty; at least one entry is required");
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string f = field + "[" + std::to_string(i) + "]";
    if (v[i] < 0 || int64_t(v[i]) >= bound)
      throw_input_error(where, 0, f, "value " + std::to_string(v[i]) + " is outside 0 .. " + bound_name + "-1 = " +
                                         std::to_string(bound - 1));
    if (i > 0 && v[i] <= v[i - 1])
      throw_input_error(where, 0, f, "value " + std::to_string(v[i]) + " does not follow " + std::to_string(v[i - 1]) +
                                         "; the list must be strictly increasing");
  }
}

void check_positive(int64_t v, int64_t hi, const std::string& where, const std::string& field) {
  if (v < 1 || v > hi)
    throw_input_error(where, 0, field, "value " + std::to_string(v) + " is outside 1 .. " + std::to_string(hi));
}

void check_finite(const std::vector<float>& v, const std::string& where, const std::string& field) {
  for (size_t i = 0; i < v.size(); ++i)
    if (!std::isfinite(v[i]))
      throw_input_error(where, 0, field + "[" + std::to_string(i) + "]", "value is " + std::to_string(v[i]) +
                                                                              "; statistics must be finite");
}

}  // namespace

void validate_trace(const TraceMeta& m, const TraceTokens& t, const std::string& where) {
  if (m.schema != kTraceSchemaVersion)
    throw_input_error(where, 0, "kvsim_trace.schema",
                      "version " + std::to_string(m.schema) + " is not supported; this kvsim reads version " +
                          std::to_string(kTraceSchemaVersion));
  const TraceModel& mo = m.model;
  check_positive(mo.layers, kMaxLayers, where, "kvsim_trace.model.layers");
  check_positive(mo.heads, kMaxHeads, where, "kvsim_trace.model.heads");
  check_positive(mo.kv_heads, kMaxHeads, where, "kvsim_trace.model.kv_heads");
  check_positive(mo.head_dim, kMaxHeadDim, where, "kvsim_trace.model.head_dim");
  if (mo.heads % mo.kv_heads != 0)
    throw_input_error(where, 0, "kvsim_trace.model.kv_heads",
                      "value " + std::to_string(mo.kv_heads) + " does not divide heads = " + std::to_string(mo.heads));
  if (mo.head_dim % 2 != 0)
    throw_input_error(where, 0, "kvsim_trace.model.head_dim",
                      "value " + std::to_string(mo.head_dim) + " is odd; RoPE rotates pairs, so it must be even");
  if (!(mo.rope_theta > 0) || !std::isfinite(mo.rope_theta))
    throw_input_error(where, 0, "kvsim_trace.model.rope_theta",
                      "value " + std::to_string(mo.rope_theta) + " must be a finite number > 0");
  check_index_list(m.layers, mo.layers, where, "kvsim_trace.layers", "layers", true);
  check_index_list(m.kv_heads, mo.kv_heads, where, "kvsim_trace.kv_heads", "kv_heads", true);
  check_index_list(m.query_heads, mo.heads, where, "kvsim_trace.query_heads", "heads", true);
  for (size_t i = 0; i < m.query_heads.size(); ++i) {
    const int kv = m.query_heads[i] / mo.group();
    if (!std::binary_search(m.kv_heads.begin(), m.kv_heads.end(), kv))
      throw_input_error(where, 0, "kvsim_trace.query_heads[" + std::to_string(i) + "]",
                        "query head " + std::to_string(m.query_heads[i]) + " reads KV head " + std::to_string(kv) +
                            " (group size " + std::to_string(mo.group()) + "), which kv_heads does not store");
  }
  const int64_t T = t.tokens();
  check_positive(T, kMaxTokens, where, "token_ids (length)");
  if (m.prompt_tokens < 1 || m.prompt_tokens > T)
    throw_input_error(where, 0, "kvsim_trace.prompt_tokens",
                      "value " + std::to_string(m.prompt_tokens) + " is outside 1 .. T = " + std::to_string(T));
  check_index_list(m.sentence_starts, T, where, "kvsim_trace.sentence_starts", "T", true);
  if (m.sentence_starts.front() != 0)
    throw_input_error(where, 0, "kvsim_trace.sentence_starts[0]",
                      "value " + std::to_string(m.sentence_starts.front()) + " must be 0 (the first sentence starts the trace)");
  check_index_list(t.query_positions, T, where, "query_positions", "T", true);
  for (size_t i = 0; i < t.token_ids.size(); ++i)
    if (t.token_ids[i] < 0)
      throw_input_error(where, 0, "token_ids[" + std::to_string(i) + "]",
                        "value " + std::to_string(t.token_ids[i]) + " is negative; token ids are >= 0");
  const int64_t G = T - m.prompt_tokens;
  if (!t.surprisal.empty() && int64_t(t.surprisal.size()) != T)
    throw_input_error(where, 0, "surprisal", "has " + std::to_string(t.surprisal.size()) +
                                                 " entries; it must have one per token, T = " + std::to_string(T));
  for (const auto* v : {&t.entropy, &t.varentropy}) {
    const std::string name = v == &t.entropy ? "entropy" : "varentropy";
    if (!v->empty() && int64_t(v->size()) != G)
      throw_input_error(where, 0, name, "has " + std::to_string(v->size()) +
                                            " entries; it must have one per generated token, T - prompt_tokens = " +
                                            std::to_string(G));
  }
  if (t.entropy.empty() != t.varentropy.empty())
    throw_input_error(where, 0, t.entropy.empty() ? "varentropy" : "entropy",
                      "is present without its partner; entropy and varentropy come together");
  check_finite(t.surprisal, where, "surprisal");
  check_finite(t.entropy, where, "entropy");
  check_finite(t.varentropy, where, "varentropy");
}

}  // namespace kvsim
