// A trace: the queries, keys and values a model produced over one long sequence, plus per-token
// statistics, as policies need them to really select. One interface, TraceSource, is implemented by
// every kind of trace — a file or a directory of shards (trace_file.hpp), a synthetic trace generated
// lazily (synthetic.hpp), a slice of another trace (slice.hpp) — so replay, profiling and writing
// never care where the numbers come from.
//
// Shapes (docs/trace-format.md is the normative text):
//   keys, values  [Ls, Hks, T, d]  post-RoPE, for the T tokens of prompt + generation
//   queries       [Ls, Hqs, S, d]  post-RoPE, at token positions query_positions[S]
// where Ls = meta.layers.size() stored layers, Hks = meta.kv_heads.size() stored KV heads and
// Hqs = meta.query_heads.size() stored query heads. Slots index those lists: layer slot 0 is model
// layer meta.layers[0], and so on. The query at position p attends keys 0..p (causal, itself included).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.hpp"

namespace kvsim {

inline constexpr int kTraceSchemaVersion = 1;

// The model that produced the trace (whole-model shapes, not the stored subset).
struct TraceModel {
  std::string name;          // free text, e.g. "SmolLM2-135M-Instruct"
  int layers = 0;            // L
  int heads = 0;             // H query heads
  int kv_heads = 0;          // Hkv (H % Hkv == 0; GQA group = H / Hkv)
  int head_dim = 0;          // d (even: RoPE rotates pairs)
  double rope_theta = 0;     // RoPE base
  std::string dtype;         // the model's activation dtype, e.g. "bf16" (free text, informative)
  int group() const { return kv_heads > 0 ? heads / kv_heads : 0; }
};

// Where the trace came from, for humans and reproducibility.
struct TraceProvenance {
  std::string kind;     // "synthetic", "huggingface", "gguf" or "other"
  std::string model;    // model id or file
  std::string text;     // text file, preset name or description of the prompt
  std::string command;  // the command line that made it
  int64_t seed = -1;    // generator seed (synthetic), -1 when none
};

struct TraceMeta {
  int schema = kTraceSchemaVersion;
  TraceModel model;
  std::vector<int> layers;       // model layer of each stored layer slot; sorted, unique, < L
  std::vector<int> kv_heads;     // stored KV heads; sorted, unique, < Hkv
  std::vector<int> query_heads;  // stored query heads; sorted, unique, < H, each in a stored KV head's group
  int64_t prompt_tokens = 0;     // P; tokens P..T-1 were generated
  std::vector<int64_t> sentence_starts;  // first token of each sentence; starts at 0, strictly increasing, < T
  TraceProvenance source;
};

// Per-token and per-step arrays; small (a few bytes per token), so held in memory.
struct TraceTokens {
  std::vector<int32_t> token_ids;        // [T]
  std::vector<float> surprisal;          // [T] -log p(token t | tokens < t); [0] is 0. Empty when absent.
  std::vector<float> entropy;            // [G = T-P] entropy (nats) of the distribution token P+i was drawn from. Empty when absent.
  std::vector<float> varentropy;         // [G] variance of -log p under that distribution. Empty when absent.
  std::vector<int64_t> query_positions;  // [S] strictly increasing, < T
  int64_t tokens() const { return int64_t(token_ids.size()); }
  int64_t steps() const { return int64_t(query_positions.size()); }
};

class TraceSource {
 public:
  virtual ~TraceSource() = default;
  virtual const TraceMeta& meta() const = 0;
  virtual const TraceTokens& tokens() const = 0;
  virtual bool has_values() const = 0;
  // The element type the data is held in (fp32, fp16 or bf16); readers always get float.
  virtual DType storage_dtype() const = 0;

  // Rows [t0, t1) of one stored layer slot and KV-head slot, converted to float, written to
  // out[(t - t0) * d + i]. Requires 0 <= t0 <= t1 <= T. Every const member must be safe to call from
  // several threads at once (replay loads the trace in parallel).
  virtual void keys(int layer_slot, int kv_slot, int64_t t0, int64_t t1, float* out) const = 0;
  virtual void values(int layer_slot, int kv_slot, int64_t t0, int64_t t1, float* out) const = 0;
  // Query rows [s0, s1) (indices into query_positions) of one stored layer slot and query-head slot.
  virtual void queries(int layer_slot, int q_slot, int64_t s0, int64_t s1, float* out) const = 0;

  int head_dim() const { return meta().model.head_dim; }
  int64_t tokens_count() const { return tokens().tokens(); }
  int64_t steps_count() const { return tokens().steps(); }
  // The stored KV-head slot that query-head slot q reads (GQA), or -1 when that KV head is not stored.
  int kv_slot_of_query(int q_slot) const;
};

// Checks a TraceMeta + TraceTokens pair for consistency (model shapes, sorted/unique index lists,
// GQA membership, prompt length, sentence starts, query positions, statistic lengths). Throws
// InputError naming `where` (a file) and the field. Used by every reader and writer.
void validate_trace(const TraceMeta& m, const TraceTokens& t, const std::string& where);

}  // namespace kvsim
