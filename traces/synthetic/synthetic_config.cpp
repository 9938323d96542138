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

// layer_groups: a list of {layers: [first, last], KNOB: value, ...} with KNOB from group_knobs().
std::vector<LayerGroup> read_layer_groups(YamlMap& m, const std::vector<LayerGroup>& fallback, bool has_lines) {
  if (!m.has("layer_groups")) {
    m.string("layer_groups", std::string());  // absent: keep the current value (and mark the key as known)
    return fallback;
  }
  const YAML::Node n = m.node("layer_groups");
  if (n.IsNull()) return {};
  if (!n.IsSequence())
    m.fail("layer_groups", "expected a list of {layers: [first, last], knob: value, ...}, e.g. "
                           "[{layers: [0, 9], sink_strength: 9.5}]");
  std::vector<LayerGroup> out;
  for (size_t i = 0; i < n.size(); ++i) {
    const std::string where = m.field("layer_groups") + "[" + std::to_string(i) + "]";
    if (!n[i].IsMap()) m.fail("layer_groups", "entry " + std::to_string(i) + " is not a mapping like {layers: [0, 9], sink_strength: 9.5}");
    YamlMap e(n[i], m.file(), where, has_lines);
    LayerGroup g;
    const YAML::Node ly = e.node("layers");
    if (!ly.IsSequence() || ly.size() != 2) e.fail("layers", "expected [first, last] model layers (inclusive), e.g. [0, 9]");
    g.first = int(e.parse_number(ly[0], "layers[0]", Range::between(0, 4095)));
    g.last = int(e.parse_number(ly[1], "layers[1]", Range::between(0, 4095)));
    if (g.last < g.first)
      e.fail("layers", "last layer " + std::to_string(g.last) + " is before first layer " + std::to_string(g.first));
    for (const GroupKnob& k : group_knobs()) {
      if (e.has(k.name)) g.knobs.emplace_back(k.name, e.number(k.name, k.range));
      else e.string(k.name, std::string());  // absent: inherits the top level (and the key is known)
    }
    e.finish();  // anything else is not a per-group knob: "did you mean" among the ones read
    out.push_back(std::move(g));
  }
  return out;
}

// scaling: {reference_tokens: T, rules: [{group: i, knob: name, slope: s, tokens: [...], values: [...]}]}.
void read_scaling(YamlMap& m, SyntheticConfig& c, bool has_lines) {
  if (!m.has("scaling")) {
    m.string("scaling", std::string());
    return;
  }
  const YAML::Node n = m.node("scaling");
  c.scaling.clear();
  c.scaling_reference_tokens = 0;
  if (n.IsNull()) return;
  if (!n.IsMap()) m.fail("scaling", "expected {reference_tokens: T, rules: [{group: 0, knob: NAME, slope: S}, ...]}");
  YamlMap sm(n, m.file(), m.field("scaling"), has_lines);
  c.scaling_reference_tokens = sm.integer("reference_tokens", Range::between(1, 4294967296.0));
  const YAML::Node rules = sm.node("rules");
  if (!rules.IsSequence()) sm.fail("rules", "expected a list of {group: 0, knob: NAME, slope: S}");
  std::vector<std::string> names;
  for (const GroupKnob& k : group_knobs()) names.push_back(k.name);
  for (size_t i = 0; i < rules.size(); ++i) {
    YamlMap r(rules[i], m.file(), sm.field("rules") + "[" + std::to_string(i) + "]", has_lines);
    ScalingRule rule;
    rule.group = int(r.integer("group", Range::between(0, 4095)));
    rule.knob = r.choice("knob", names);
    rule.slope = r.number("slope", Range::between(-1e6, 1e6));
    if (r.has("tokens")) {
      const YAML::Node t = r.node("tokens");
      for (size_t j = 0; t.IsSequence() && j < t.size(); ++j)
        rule.tokens.push_back(int64_t(r.parse_number(t[j], "tokens", Range::between(1, 4294967296.0))));
    }
    if (r.has("values")) {
      const YAML::Node v = r.node("values");
      for (size_t j = 0; v.IsSequence() && j < v.size(); ++j)
        rule.values.push_back(r.parse_number(v[j], "values", Range::between(-1e18, 1e18)));
    }
    r.finish();
    c.scaling.push_back(std::move(rule));
  }
  sm.finish();
}

// Reads every key `m` may hold into `c`, keeping c's current value for keys that are absent. The model
// shape is read after `model:`, so explicit numbers beside a library model override it.
void read_fields(SyntheticConfig& c, YamlMap& m, bool has_lines) {
  m.string("description", "");  // free text for humans
  if (m.has("fit")) m.node("fit");  // `kvsim trace fit`'s provenance (sources, residuals): for humans
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
  c.sink_topic = m.boolean("sink_topic", c.sink_topic);
  c.recency_strength = m.number("recency_strength", Range::between(0, 50), c.recency_strength);
  c.recency_window = m.number("recency_window", Range::between(1, 1e9), c.recency_window);
  c.recency_decay = m.boolean("recency_decay", c.recency_decay);
  c.retrieval_heads = m.number("retrieval_heads", Range::between(0, 1), c.retrieval_heads);
  c.weak_factor = m.number("weak_factor", Range::between(0, 1), c.weak_factor);
  if (m.has("retrieval_sink")) c.retrieval_sink = m.number("retrieval_sink", Range::between(0, 1));
  else m.string("retrieval_sink", std::string());  // absent: keep the current value (unset: weak_factor)
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

  c.layer_groups = read_layer_groups(m, c.layer_groups, has_lines);
  read_scaling(m, c, has_lines);
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

void check_layer_groups(const SyntheticConfig& c, const std::string& where) {
  std::vector<int> owner(size_t(c.layers), -1);
  for (size_t i = 0; i < c.layer_groups.size(); ++i) {
    const LayerGroup& g = c.layer_groups[i];
    const std::string field = "layer_groups[" + std::to_string(i) + "].layers";
    if (g.last >= c.layers)
      throw_input_error(where, 0, field, "[" + std::to_string(g.first) + ", " + std::to_string(g.last) +
                                             "] reaches past the model's last layer " + std::to_string(c.layers - 1));
    for (int l = g.first; l <= g.last; ++l) {
      if (owner[size_t(l)] >= 0)
        throw_input_error(where, 0, field, "layer " + std::to_string(l) + " is already in layer_groups[" +
                                               std::to_string(owner[size_t(l)]) + "]; groups must not overlap");
      owner[size_t(l)] = int(i);
    }
  }
  for (size_t i = 0; i < c.scaling.size(); ++i)
    if (c.scaling[i].group >= int(c.layer_groups.size()))
      throw_input_error(where, 0, "scaling.rules[" + std::to_string(i) + "].group",
                        "value " + std::to_string(c.scaling[i].group) + " is not a layer group: there are " +
                            std::to_string(c.layer_groups.size()));
}

}  // namespace

const std::vector<GroupKnob>& group_knobs() {
  static const std::vector<GroupKnob> knobs = {
      {"retrieval_heads", &SyntheticConfig::retrieval_heads, Range::between(0, 1)},
      {"topic_strength", &SyntheticConfig::topic_strength, Range::between(0, 50)},
      {"sink_strength", &SyntheticConfig::sink_strength, Range::between(0, 50)},
      {"recency_strength", &SyntheticConfig::recency_strength, Range::between(0, 50)},
      {"recency_window", &SyntheticConfig::recency_window, Range::between(1, 1e9)},
      {"weak_factor", &SyntheticConfig::weak_factor, Range::between(0, 1)},
      {"retrieval_sink", &SyntheticConfig::retrieval_sink, Range::between(0, 1)},
      {"query_ar", &SyntheticConfig::query_ar, Range::between(0, 0.999999)},
      {"query_wander", &SyntheticConfig::query_wander, Range::between(0, 10)},
      {"query_noise", &SyntheticConfig::query_noise, Range::between(0, 10)},
      {"key_noise", &SyntheticConfig::key_noise, Range::between(0, 100)},
      {"value_noise", &SyntheticConfig::value_noise, Range::between(0, 100)},
      {"value_topic", &SyntheticConfig::value_topic, Range::between(0, 100)},
  };
  return knobs;
}

SyntheticConfig config_for_layer(const SyntheticConfig& c, int layer) {
  SyntheticConfig out = c;
  for (const LayerGroup& g : c.layer_groups) {
    if (layer < g.first || layer > g.last) continue;
    for (const auto& [name, v] : g.knobs)
      for (const GroupKnob& k : group_knobs())
        if (name == k.name) out.*k.field = v;
  }
  return out;
}

void apply_scaling(SyntheticConfig& c) {
  if (c.scaling.empty() || c.scaling_reference_tokens <= 0) return;
  const double x = std::log(double(c.prompt_tokens + c.generated_tokens) / double(c.scaling_reference_tokens));
  for (const ScalingRule& r : c.scaling) {
    if (r.group < 0 || r.group >= int(c.layer_groups.size())) continue;  // validate_synthetic_config reports it
    const GroupKnob* k = nullptr;
    for (const GroupKnob& g : group_knobs())
      if (r.knob == g.name) k = &g;
    auto& knobs = c.layer_groups[size_t(r.group)].knobs;
    auto it = std::find_if(knobs.begin(), knobs.end(), [&](const auto& kv) { return kv.first == r.knob; });
    // A rule for a knob the group does not set scales the top-level value it inherits.
    const double base = it != knobs.end() ? it->second : c.*(k->field);
    // Windows scale as a power of T (ln W linear in ln T) and query_ar's 1 - ar likewise, so a rule
    // extrapolated to a longer trace cannot run a window or a correlation through its bound.
    double v = base + r.slope * x;
    if (r.knob == "recency_window") v = base * std::exp(r.slope * x);
    if (r.knob == "query_ar") v = 1.0 - (1.0 - base) * std::exp(r.slope * x);
    v = std::clamp(v, k->range.lo, k->range.hi);
    if (it != knobs.end()) it->second = v;
    else knobs.emplace_back(r.knob, v);
  }
  c.scaling.clear();
  c.scaling_reference_tokens = 0;
}

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
  check_layer_groups(c, where);
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
                                      const std::vector<std::pair<std::string, std::string>>& overrides,
                                      int64_t total_tokens) {
  const std::string path = resolve(LibraryKind::trace, name_or_path, "", 0, "trace preset");
  SyntheticConfig c;
  YamlMap m(load_yaml_file(path), path, "");
  read_fields(c, m, true);
  m.finish();
  c.preset = name_or_path;
  for (const auto& [k, v] : overrides) apply_override(c, k, v);
  if (total_tokens > 0) {
    if (total_tokens <= c.generated_tokens)
      throw_input_error("command line", 0, "--tokens",
                        "value " + std::to_string(total_tokens) + " leaves no prompt: the config generates " +
                            std::to_string(c.generated_tokens) + " tokens, so --tokens must exceed that");
    c.prompt_tokens = total_tokens - c.generated_tokens;
  }
  const std::string where = overrides.empty() && total_tokens <= 0 ? path : path + " (with command-line overrides)";
  check_layer_groups(c, where);  // before scaling reads the groups
  apply_scaling(c);
  validate_synthetic_config(c, where);
  return c;
}

}  // namespace kvsim
