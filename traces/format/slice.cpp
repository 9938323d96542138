#include "traces/format/slice.hpp"

#include <algorithm>
#include <charconv>

#include "core/error.hpp"

namespace kvsim {

namespace {

int64_t parse_int(const std::string& s, const std::string& field, const std::string& whole) {
  int64_t v = 0;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || ptr != s.data() + s.size() || v < 0)
    throw_input_error("command line", 0, field, "value '" + whole + "' is not a list of non-negative integers");
  return v;
}

// Slots of `wanted` (model indices) in `stored`; all slots when `wanted` is empty.
std::vector<int> slots_of(const std::vector<int>& wanted, const std::vector<int>& stored, const std::string& where,
                          const std::string& field) {
  std::vector<int> out;
  if (wanted.empty()) {
    for (size_t i = 0; i < stored.size(); ++i) out.push_back(int(i));
    return out;
  }
  std::vector<std::string> names;
  for (int s : stored) names.push_back(std::to_string(s));
  for (int w : wanted) {
    const auto it = std::lower_bound(stored.begin(), stored.end(), w);
    if (it == stored.end() || *it != w)
      throw_input_error(where, 0, field, "value " + std::to_string(w) + " is not stored in this trace; stored: " +
                                             join(names));
    out.push_back(int(it - stored.begin()));
  }
  return out;
}

}  // namespace

std::vector<int> parse_index_list(const std::string& text, const std::string& field) {
  std::vector<int> out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = text.find(',', start);
    const std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    const size_t dash = item.find('-');
    if (dash == std::string::npos) {
      out.push_back(int(parse_int(item, field, text)));
    } else {
      const int64_t a = parse_int(item.substr(0, dash), field, text), b = parse_int(item.substr(dash + 1), field, text);
      if (b < a || b - a > 1'000'000)
        throw_input_error("command line", 0, field, "range '" + item + "' must be a-b with a <= b");
      for (int64_t v = a; v <= b; ++v) out.push_back(int(v));
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

void parse_step_range(const std::string& text, SliceSpec& spec, const std::string& field) {
  const size_t colon = text.find(':');
  if (colon == std::string::npos) {
    spec.step_begin = parse_int(text, field, text);
    spec.step_end = spec.step_begin + 1;
    return;
  }
  const std::string a = text.substr(0, colon), b = text.substr(colon + 1);
  spec.step_begin = a.empty() ? 0 : parse_int(a, field, text);
  spec.step_end = b.empty() ? std::nullopt : std::optional<int64_t>(parse_int(b, field, text));
}

SlicedTrace::SlicedTrace(const TraceSource& base, const SliceSpec& spec, const std::string& where) : base_(base) {
  const TraceMeta& bm = base.meta();
  const TraceTokens& bt = base.tokens();
  layer_slots_ = slots_of(spec.layers, bm.layers, where, "layers");
  kv_slots_ = slots_of(spec.kv_heads, bm.kv_heads, where, "kv_heads");
  const int64_t S = bt.steps();
  const int64_t e = spec.step_end.value_or(S);
  if (spec.step_begin >= e || e > S)
    throw_input_error(where, 0, "steps",
                      "range " + std::to_string(spec.step_begin) + ":" + std::to_string(e) +
                          " is empty or outside the trace's query rows 0:" + std::to_string(S));
  step0_ = spec.step_begin;

  meta_ = bm;
  meta_.layers.clear();
  for (int s : layer_slots_) meta_.layers.push_back(bm.layers[size_t(s)]);
  meta_.kv_heads.clear();
  for (int s : kv_slots_) meta_.kv_heads.push_back(bm.kv_heads[size_t(s)]);
  meta_.query_heads.clear();
  for (size_t q = 0; q < bm.query_heads.size(); ++q) {
    const int kv = bm.query_heads[q] / bm.model.group();
    if (std::binary_search(meta_.kv_heads.begin(), meta_.kv_heads.end(), kv)) {
      meta_.query_heads.push_back(bm.query_heads[q]);
      q_slots_.push_back(int(q));
    }
  }
  if (q_slots_.empty())
    throw_input_error(where, 0, "kv_heads", "the kept KV heads have no stored query heads; keep another KV head");

  tokens_.query_positions.assign(bt.query_positions.begin() + step0_, bt.query_positions.begin() + e);
  const int64_t T = spec.truncate_tokens ? tokens_.query_positions.back() + 1 : bt.tokens();
  tokens_.token_ids.assign(bt.token_ids.begin(), bt.token_ids.begin() + T);
  if (!bt.surprisal.empty()) tokens_.surprisal.assign(bt.surprisal.begin(), bt.surprisal.begin() + T);
  meta_.prompt_tokens = std::min(bm.prompt_tokens, T);
  const int64_t G = T - meta_.prompt_tokens;
  if (!bt.entropy.empty() && G > 0) {
    tokens_.entropy.assign(bt.entropy.begin(), bt.entropy.begin() + G);
    tokens_.varentropy.assign(bt.varentropy.begin(), bt.varentropy.begin() + G);
  }
  if (!spec.command.empty())
    meta_.source.command = (meta_.source.command.empty() ? "" : meta_.source.command + " | ") + spec.command;
  meta_.sentence_starts.clear();
  for (int64_t s : bm.sentence_starts)
    if (s < T) meta_.sentence_starts.push_back(s);
  validate_trace(meta_, tokens_, where);
}

void SlicedTrace::keys(int l, int h, int64_t t0, int64_t t1, float* out) const {
  base_.keys(layer_slots_.at(size_t(l)), kv_slots_.at(size_t(h)), t0, t1, out);
}
void SlicedTrace::values(int l, int h, int64_t t0, int64_t t1, float* out) const {
  base_.values(layer_slots_.at(size_t(l)), kv_slots_.at(size_t(h)), t0, t1, out);
}
void SlicedTrace::queries(int l, int q, int64_t s0, int64_t s1, float* out) const {
  base_.queries(layer_slots_.at(size_t(l)), q_slots_.at(size_t(q)), s0 + step0_, s1 + step0_, out);
}

}  // namespace kvsim
