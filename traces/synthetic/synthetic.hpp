// A synthetic trace with the attention structure the seed papers rely on — sentences, topics,
// attention sinks, a recency window, needles, drifting and self-similar decode queries, GQA groups,
// retrieval vs local heads, surprisal and entropy statistics — generated lazily from a seed.
//
// Lazy and deterministic: construction builds only per-token/per-sentence bookkeeping (O(T) bytes) and
// small per-head direction tables. keys()/values()/queries() compute the requested rows on demand from
// a counter-based RNG (traces/synthetic/counter_rng.hpp), so a 1M-token trace is never held whole, and the same
// (config, seed) gives bit-identical floats whatever ranges are asked for, in whatever order.
//
// How each structural knob shapes attention is documented at its field below and, with the presets
// in scenarios/traces/, in docs/synthetic-traces.md. Every strength is expressed in nats: the amount
// it adds to the logit q.k/sqrt(d) of the tokens it favours, so e^strength is the attention ratio.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/yaml_reader.hpp"
#include "traces/synthetic/rope.hpp"
#include "traces/format/trace.hpp"

namespace kvsim {

// A sentence (or several, for long ones) with its own topic, inserted into the prompt.
struct NeedleSpec {
  double depth = 0.5;   // where in the prompt, as a fraction 0 .. 1 of prompt_tokens
  int64_t length = 32;  // tokens
};

// A contiguous range of model layers with knobs of its own (`layer_groups:`); layers no group covers use
// the top-level values. Only the knobs in group_knobs() may be set per group: the ones that shape one
// head's attention, queries and values (what `kvsim trace fit` fits per group).
struct LayerGroup {
  int first = 0, last = 0;                            // model layers first .. last, inclusive
  std::vector<std::pair<std::string, double>> knobs;  // (group_knobs() name, value), each name once
};

// How one group knob follows the trace length (`scaling:`, written by `kvsim trace fit` from captures
// of one text at several lengths): at T tokens the knob is its group's value + slope x ln(T /
// reference_tokens), clamped to the knob's range; recency_window is multiplied by (T / reference)^slope
// and query_ar's 1 - ar likewise (power laws, which stay inside their ranges). slope 0 is "constant".
struct ScalingRule {
  int group = 0;  // index into layer_groups
  std::string knob;
  double slope = 0;
  std::vector<int64_t> tokens;  // evidence: the lengths fitted
  std::vector<double> values;   // evidence: the knob fitted at each length
};

struct SyntheticConfig {
  // ---- model shape (explicit, or from `model: NAME` in scenarios/models/) ----
  std::string model_name = "synthetic";  // recorded in the trace's meta
  std::string model_dtype = "bf16";      // the model's activation dtype, informative
  int layers = 2;                        // L
  int heads = 4;                         // H query heads
  int kv_heads = 2;                      // Hkv; H % Hkv == 0
  int head_dim = 64;                     // d; even
  double rope_theta = 500000;            // RoPE base
  std::vector<int> store_layers;         // stored model layers; empty = all
  std::vector<int> store_kv_heads;       // stored KV heads (with all their query heads); empty = all
  DType dtype = DType::bf16;             // storage dtype: every float is rounded to it (fp32, fp16, bf16)
  bool values = true;                    // whether the trace has values

  // ---- length and queries ----
  uint64_t seed = 1;
  int64_t prompt_tokens = 1792;   // P
  int64_t generated_tokens = 256; // G; T = P + G
  int64_t obs_window = 32;        // queries at the last obs_window prompt positions (the question,
                                  // SnapKV's observation window), then at every decode position P..T-1

  // ---- text structure ----
  double mean_sentence_tokens = 20;  // mean sentence length (lognormal, at least 2 tokens)
  double sentence_spread = 0.5;      // log-space standard deviation of sentence length
  int topics = 8;                    // distinct topics the text moves between
  double topic_stickiness = 0.85;    // P(next prompt sentence keeps the topic): documents of 1/(1-p) sentences

  // ---- attention structure (nats of logit; see each effect) ----
  double topic_strength = 4;       // logit boost of same-topic tokens for a retrieval head's query
  int sink_tokens = 4;             // the first tokens, which every query can find at any distance
  double sink_strength = 10;       // logit boost of each sink token for a local head's query
  bool sink_topic = true;          // the sink tokens carry their sentence's topic like every token (as presets
                                   // always did); false: only the sink, so a query whose topic is the first
                                   // sentence's does not add its topic boost to the sinks' (kvsim trace fit)
  double recency_strength = 8;     // logit boost of the nearest tokens for a local head's query; falls to
                                   // half at distance recency_window (a Lorentzian window built from RoPE pairs)
  double recency_window = 32;      // tokens: the width of that window
  bool recency_decay = false;      // keys more than 4-8 recency_windows before the first query carry no recency
                                   // component: the RoPE-pair kernel oscillates there instead of fading
  double retrieval_heads = 0.25;   // fraction of (layer, kv head) pairs that are retrieval heads
  double weak_factor = 0.25;       // how much of a strength a head keeps for what it does not specialize in
                                   // (topic for local heads; recency and sinks for retrieval heads)
  double retrieval_sink = -1;      // share of sink_strength retrieval heads keep; < 0 (unset): weak_factor
  std::vector<NeedleSpec> needles; // sentences of a unique topic placed in the prompt
  double needle_query_strength = 12;  // logit boost of needle tokens for retrieval heads' question and decode queries

  // ---- query dynamics ----
  double drift_steps = 256;   // mean decode steps between topic changes of the generated text (and its queries)
  double query_ar = 0.98;     // per-step correlation of the queries' slowly wandering component (AR(1)-like)
  double query_wander = 0.5;  // size of that component relative to the query's topic component
  double query_noise = 0.1;   // per-element white noise of each query (relative to its norm / sqrt(d))
  double gqa_head_noise = 0.3;  // how far a query head's topic directions stray from its KV head's (relative)

  // ---- noise and values ----
  double key_noise = 0.5;     // per-element Gaussian noise of keys (standard deviation, model units)
  double value_noise = 1.0;   // per-element Gaussian noise of values
  double value_topic = 1.0;   // per-element size of the topic's value direction (so outputs depend on topic)

  // ---- statistics ----
  double surprisal_start = 7;   // mean surprisal (nats) of a sentence's first token (+1.5 on a topic change)
  double surprisal_inside = 1.0;  // mean surprisal inside sentences (gamma-distributed, shape 2)
  double entropy_base = 0.5;    // mean entropy (nats) of ordinary generated tokens
  double entropy_spike = 3.5;   // mean entropy where the generated text changes topic

  // ---- RoPE layout (0 = automatic) ----
  int content_pairs = 0;  // lowest-frequency pairs (after the sink pair) carrying topics; 0: those that turn
                          // <= 1 rad over T, at least 4, at most d/4
  int recency_pairs = 0;  // highest-frequency pairs carrying recency; 0: those turning >= 1/(8 recency_window)
                          // rad per token (the window needs them), as many as fit below the content pairs

  // ---- per-layer-group knobs and their scaling with length (empty: every layer uses the above) ----
  std::vector<LayerGroup> layer_groups;  // disjoint, inside 0 .. layers-1
  std::vector<ScalingRule> scaling;      // applied by load_synthetic_config at T = prompt + generated
  int64_t scaling_reference_tokens = 0;  // the T the group values were fitted at (0: no scaling)

  std::string preset;  // name or file it was loaded from (provenance)
  std::string command;  // the command line that generated it (provenance; empty when none)
};

// A knob a layer group may set: its name, the top-level field it overrides and its range (the same as
// at top level).
struct GroupKnob {
  const char* name;
  double SyntheticConfig::*field;
  Range range;
};
const std::vector<GroupKnob>& group_knobs();

// `c` with the knobs of the group covering model layer `layer` applied (c's own values when none does).
SyntheticConfig config_for_layer(const SyntheticConfig& c, int layer);

// Loads a preset by name (scenarios/traces/NAME.yaml) or a YAML file path, then applies `overrides`
// (key, value) in order, as `--set key=value` does, then `total_tokens` when > 0 (prompt_tokens =
// total_tokens - generated_tokens), then the scaling rules at the final length. Validates the result.
// Errors name the file, line and field, or "command line" and the key for an override.
SyntheticConfig load_synthetic_config(const std::string& name_or_path,
                                      const std::vector<std::pair<std::string, std::string>>& overrides = {},
                                      int64_t total_tokens = 0);

// Applies the scaling rules at T = prompt_tokens + generated_tokens and clears them (so applying twice
// changes nothing); group values become the values at T.
void apply_scaling(SyntheticConfig& c);

// Sets one top-level key from text (parsed as YAML, so lists work: needles=[{depth: 0.3, length: 64}]),
// with the same checks as the file; errors name "command line" and the key. Does not re-check
// cross-field constraints; call validate_synthetic_config() after the last override.
void apply_override(SyntheticConfig& c, const std::string& key, const std::string& value);

// Cross-field checks (shape, stored subsets, window <= prompt, needles fit, RoPE layout). `where` names
// the source for messages.
void validate_synthetic_config(const SyntheticConfig& c, const std::string& where);

// Every const member is safe to call from several threads at once (there is no mutable state), so a
// writer can generate layers or heads in parallel.
class SyntheticTrace final : public TraceSource {
 public:
  explicit SyntheticTrace(SyntheticConfig cfg);

  const TraceMeta& meta() const override { return meta_; }
  const TraceTokens& tokens() const override { return tokens_; }
  bool has_values() const override { return cfg_.values; }
  DType storage_dtype() const override { return cfg_.dtype; }
  void keys(int layer_slot, int kv_slot, int64_t t0, int64_t t1, float* out) const override;
  void values(int layer_slot, int kv_slot, int64_t t0, int64_t t1, float* out) const override;
  void queries(int layer_slot, int q_slot, int64_t s0, int64_t s1, float* out) const override;

  // The same rows before RoPE (and before rounding to the storage dtype): keys() is exactly
  // rope(pre_rope_keys, t) rounded. For tests and analysis.
  void pre_rope_keys(int layer_slot, int kv_slot, int64_t t0, int64_t t1, float* out) const;
  void pre_rope_queries(int layer_slot, int q_slot, int64_t s0, int64_t s1, float* out) const;

  const SyntheticConfig& config() const { return cfg_; }
  // Whether model (layer, kv head) is a retrieval head (else a local head).
  bool is_retrieval_head(int layer, int kv_head) const;
  // Topic of each token (needle i has topic topics + i).
  const std::vector<uint16_t>& token_topics() const { return topic_; }
  // Token range [first, second) of each needle.
  const std::vector<std::pair<int64_t, int64_t>>& needle_spans() const { return needle_spans_; }
  int content_pairs() const { return content_pairs_; }
  int recency_pairs() const { return recency_pairs_; }

 private:
  // Per stored (layer, kv head): what its keys are made of and how strongly its queries look for it.
  struct HeadTables {
    bool retrieval = false;
    // Key magnitudes (model units) of each component, and the query magnitudes that turn them into
    // the configured logits: a_q * a_k / sqrt(d) = strength in nats.
    float k_topic = 0, k_needle = 0, k_recency = 0, k_sink = 0;
    float q_topic = 0, q_needle = 0, q_recency = 0, q_sink = 0;
    std::vector<float> topic_dir;  // [(topics + needles) * 2 * content_pairs]: unit vectors over the content dims
    std::vector<float> recency;    // [d]: unit vector over the recency dims, 0 elsewhere
    // recency_decay: keys at t >= recency_full keep the whole recency component, t <= recency_none none,
    // linear between (INT64_MIN for both when the knob is off)
    int64_t recency_full = INT64_MIN, recency_none = INT64_MIN;
    float recency_fade(int64_t t) const {  // exactly 1 when the knob is off: those keys do not change
      if (t >= recency_full) return 1.0f;
      if (t <= recency_none) return 0.0f;
      return float(double(t - recency_none) / double(recency_full - recency_none));
    }
    float sink[2] = {1, 0};        // unit vector in the sink pair
    std::vector<float> value_dir;  // [(topics + needles) * d]: each topic's value direction
    // The knobs rows are made with: the top-level ones, or the layer group's (config_for_layer).
    double key_noise = 0, value_noise = 0, value_topic = 0, query_ar = 0, query_wander = 0, query_noise = 0;
  };
  SyntheticConfig cfg_;
  TraceMeta meta_;
  TraceTokens tokens_;
  std::vector<uint16_t> topic_;  // [T]
  std::vector<std::pair<int64_t, int64_t>> needle_spans_;
  std::vector<uint8_t> retrieval_;  // [L * Hkv]
  int content_pairs_ = 0, recency_pairs_ = 0;
  RopeTable rope_;
  std::vector<HeadTables> heads_;  // [stored layers * stored kv heads]

  const HeadTables& head(int layer_slot, int kv_slot) const;
  void key_rows(int layer_slot, int kv_slot, int64_t t0, int64_t t1, float* out, bool rotate) const;
  void query_rows(int layer_slot, int q_slot, int64_t s0, int64_t s1, float* out, bool rotate) const;
  void build_text();
  // build_text's second half: token ids and the per-token statistics, once sentences and topics are set.
  void build_token_stats(const std::vector<uint8_t>& topic_change);
  void build_heads();
  void choose_retrieval_heads();
  int auto_recency_pairs() const;
};

}  // namespace kvsim
