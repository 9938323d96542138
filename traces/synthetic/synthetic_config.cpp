// Reading SyntheticConfig from YAML presets (scenarios/traces/) and `--set key=value` overrides, with
// the same strictness as every other kvsim input: unknown keys get a "did you mean", every number has a
// range, and messages name file:line:field (or "command line" and the key).
#include <algorithm>
#include <cmath>

#include "core/error.hpp"
#include "model/library.hpp"
#include "core/yaml_reader.hpp"
#include "traces/synthetic/synthetic.hpp"

namespace kvsim {

namespace {

constexpr double kBig = 1e18;

// A list of non-negative integers (`[0, 5, 31]`), or the word `all` for an empty list (= everything).
std::vector<int> read_index_list(YamlMap& m, const std::string& key, const std::vector<int>& fallback) {
  if (!m.has(key)) {
    m.string(key, std::string());  // absent: keep the current value (and mark the key as known)
    return fallback;
  }
  const YAML::Node n = m.node(key);
  if (n.IsScalar() && n.Scalar() == "all") return {};
  if (!n.IsSequence()) m.fail(key, "expected a list of indices like [0, 3] or the word 'all'");
  std::vector<int> out;
  for (size_t i = 0; i < n.size(); ++i)
    out.push_back(int(m.parse_number(n[i], key + "[" + std::to_string(i) + "]", Range::between(0, 1 << 20))));
  return out;
}

// needles: a list of {depth: 0..1, length: tokens}.
std::vector<NeedleSpec> read_needles(YamlMap& m, const std::vector<NeedleSpec>& fallback, bool has_lines) {
  if (!m.has("needles")) {
    m.string("needles", std::string());  // absent: keep the current value (and mark the key as known)
    return fallback;
  }
  const YAML::Node n = m.node("needles");
  if (n.IsNull()) return {};
  if (!n.IsSequence()) m.fail("needles", "expected a list of {depth: 0..1, length: tokens}, e.g. [{depth: 0.5, length: 32}]");
  std::vector<NeedleSpec> out;
  for (size_t i = 0; i < n.size(); ++i) {
    YamlMap e(n[i], m.file(), m.field("needles") + "[" + std::to_string(i) + "]", has_lines);
    NeedleSpec s;  // defaults: depth 0.5, length 32
    s.depth = e.number("depth", Range::between(0, 1), s.depth);
    s.length = e.integer("length", Range::between(1, 1 << 24), s.length);
    e.finish();
    out.push_back(s);
  }
  return out;
}

// Reads every key `m` may hold into `c`, keeping c's current value for keys that are absent. The model
// shape is read after `model:`, so explicit numbers beside a library model override it.
void read_fields(SyntheticConfig& c, YamlMap& m, bool has_lines) {
  m.string("description", "");  // free text for humans
  if (m.has("model")) {
    const std::string name = m.string("model");
    const ModelConfig mc = load_model_file(resolve(LibraryKind::model, name, m.file(), m.line_of("model"), m.field("model")));
    c.model_name = mc.name;
    c.layers = mc.layers;
    c.heads = mc.query_heads;
    c.kv_heads = mc.kv_heads;
    c.head_dim = mc.head_dim;
    c.rope_theta = mc.rope_theta;
    c.model_dtype = std::string(to_string(mc.dtype));
  } else {
    m.string("model", "");
  }
  c.model_name = m.string("model_name", c.model_name);
  c.model_dtype = m.choice("model_dtype", {"fp32", "fp16", "bf16", "fp8"}, c.model_dtype);
  c.layers = int(m.integer("layers", Range::between(1, 4096), c.layers));
  c.heads = int(m.integer("heads", Range::between(1, 4096), c.heads));
  c.kv_heads = int(m.integer("kv_heads", Range::between(1, 4096), c.kv_heads));
  c.head_dim = int(m.integer("head_dim", Range::between(8, 4096), c.head_dim));
  c.rope_theta = m.number("rope_theta", Range::positive(1e12), c.rope_theta);
  c.store_layers = read_index_list(m, "store_layers", c.store_layers);
  c.store_kv_heads = read_index_list(m, "store_kv_heads", c.store_kv_heads);
  const std::string dt = m.choice("dtype", {"fp32", "fp16", "bf16"}, std::string(to_string(c.dtype)));
  parse_dtype(dt, c.dtype);
  c.values = m.boolean("values", c.values);

  c.seed = uint64_t(m.integer("seed", Range::between(0, 9007199254740992.0), int64_t(c.seed)));
  c.prompt_tokens = m.integer("prompt_tokens", Range::between(1, 4294967296.0), c.prompt_tokens);
  c.generated_tokens = m.integer("generated_tokens", Range::between(0, 4294967296.0), c.generated_tokens);
  c.obs_window = m.integer("obs_window", Range::between(1, 4294967296.0), c.obs_window);

  c.mean_sentence_tokens = m.number("mean_sentence_tokens", Range::between(2, 100000), c.mean_sentence_tokens);
  c.sentence_spread = m.number("sentence_spread", Range::between(0, 3), c.sentence_spread);
  c.topics = int(m.integer("topics", Range::between(1, 4096), c.topics));
  c.topic_stickiness = m.number("topic_stickiness", Range::between(0, 1), c.topic_stickiness);

  c.topic_strength = m.number("topic_strength", Range::between(0, 50), c.topic_strength);
  c.sink_tokens = int(m.integer("sink_tokens", Range::between(0, 1 << 20), c.sink_tokens));
  c.sink_strength = m.number("sink_strength", Range::between(0, 50), c.sink_strength);
  c.recency_strength = m.number("recency_strength", Range::between(0, 50), c.recency_strength);
  c.recency_window = m.number("recency_window", Range::between(1, 1e9), c.recency_window);
  c.retrieval_heads = m.number("retrieval_heads", Range::between(0, 1), c.retrieval_heads);
  c.weak_factor = m.number("weak_factor", Range::between(0, 1), c.weak_factor);
  c.needles = read_needles(m, c.needles, has_lines);
  c.needle_query_strength = m.number("needle_query_strength", Range::between(0, 50), c.needle_query_strength);

  c.drift_steps = m.number("drift_steps", Range::between(1, kBig), c.drift_steps);
  c.query_ar = m.number("query_ar", Range::between(0, 0.999999), c.query_ar);
  c.query_wander = m.number("query_wander", Range::between(0, 10), c.query_wander);
  c.query_noise = m.number("query_noise", Range::between(0, 10), c.query_noise);
  c.gqa_head_noise = m.number("gqa_head_noise", Range::between(0, 10), c.gqa_head_noise);

  c.key_noise = m.number("key_noise", Range::between(0, 100), c.key_noise);
  c.value_noise = m.number("value_noise", Range::between(0, 100), c.value_noise);
  c.value_topic = m.number("value_topic", Range::between(0, 100), c.value_topic);

  c.surprisal_start = m.number("surprisal_start", Range::between(0, 50), c.surprisal_start);
  c.surprisal_inside = m.number("surprisal_inside", Range::positive(50), c.surprisal_inside);
  c.entropy_base = m.number("entropy_base", Range::positive(50), c.entropy_base);
  c.entropy_spike = m.number("entropy_spike", Range::between(0, 50), c.entropy_spike);

  c.content_pairs = int(m.integer("content_pairs", Range::between(0, 2048), c.content_pairs));
  c.recency_pairs = int(m.integer("recency_pairs", Range::between(0, 2048), c.recency_pairs));
}

void check_list(const std::vector<int>& v, int bound, const std::string& where, const std::string& field,
                const std::string& bound_name) {
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i] >= bound)
      throw_input_error(where, 0, field + "[" + std::to_string(i) + "]",
                        "value " + std::to_string(v[i]) + " is outside 0 .. " + bound_name + "-1 = " + std::to_string(bound - 1));
    if (i > 0 && v[i] <= v[i - 1])
      throw_input_error(where, 0, field + "[" + std::to_string(i) + "]",
                        "value " + std::to_string(v[i]) + " does not follow " + std::to_string(v[i - 1]) +
                            "; the list must be strictly increasing");
  }
}

}  // namespace

void validate_synthetic_config(const SyntheticConfig& c, const std::string& where) {
  auto fail = [&](const std::string& field, const std::string& msg) { throw_input_error(where, 0, field, msg); };
  if (c.heads % c.kv_heads != 0)
    fail("kv_heads", "value " + std::to_string(c.kv_heads) + " must divide heads (" + std::to_string(c.heads) + ")");
  if (c.head_dim % 2 != 0 || c.head_dim < 8)
    fail("head_dim", "value " + std::to_string(c.head_dim) + " must be even and >= 8 (RoPE pairs: sink, content, recency)");
  if (!(c.rope_theta > 1))
    fail("rope_theta", "value " + format_number(c.rope_theta) + " must be > 1 (frequencies theta^(-2i/d) must fall)");
  check_list(c.store_layers, c.layers, where, "store_layers", "layers");
  check_list(c.store_kv_heads, c.kv_heads, where, "store_kv_heads", "kv_heads");
  if (c.obs_window > c.prompt_tokens)
    fail("obs_window", "value " + std::to_string(c.obs_window) + " exceeds prompt_tokens (" +
                           std::to_string(c.prompt_tokens) + ")");
  if (c.sink_tokens > c.prompt_tokens)
    fail("sink_tokens", "value " + std::to_string(c.sink_tokens) + " exceeds prompt_tokens (" +
                            std::to_string(c.prompt_tokens) + ")");
  int64_t needle_total = 0;
  for (const auto& n : c.needles) needle_total += n.length;
  if (c.sink_tokens + needle_total + c.obs_window > c.prompt_tokens)
    fail("needles", "total needle length " + std::to_string(needle_total) + " does not fit between the " +
                        std::to_string(c.sink_tokens) + " sink tokens and the " + std::to_string(c.obs_window) +
                        "-token question window of a " + std::to_string(c.prompt_tokens) + "-token prompt");
  if (c.topics + int64_t(c.needles.size()) > 65535)
    fail("topics", "topics + needles must be at most 65535");
  const int n = c.head_dim / 2;
  if (c.content_pairs + std::max(c.recency_pairs, 1) + 1 > n)  // at least one recency pair remains
    fail("content_pairs", "content_pairs (" + std::to_string(c.content_pairs) + ") + recency_pairs (" +
                              std::to_string(c.recency_pairs) + ") + 1 sink pair exceed head_dim / 2 = " +
                              std::to_string(n));
  if (c.dtype == DType::fp8) fail("dtype", "value 'fp8' is not a trace storage dtype; allowed: fp32, fp16, bf16");
}

void apply_override(SyntheticConfig& c, const std::string& key, const std::string& value) {
  const std::string where = "command line";
  YAML::Node node(YAML::NodeType::Map);
  node[key] = load_yaml_string(value, where + " (" + key + "=" + value + ")");
  YamlMap m(node, where, "", false);
  read_fields(c, m, false);
  m.finish();
}

SyntheticConfig load_synthetic_config(const std::string& name_or_path,
                                      const std::vector<std::pair<std::string, std::string>>& overrides) {
  const std::string path = resolve(LibraryKind::trace, name_or_path, "", 0, "trace preset");
  SyntheticConfig c;
  YamlMap m(load_yaml_file(path), path, "");
  read_fields(c, m, true);
  m.finish();
  c.preset = name_or_path;
  for (const auto& [k, v] : overrides) apply_override(c, k, v);
  validate_synthetic_config(c, overrides.empty() ? path : path + " (with command-line overrides)");
  return c;
}

}  // namespace kvsim
