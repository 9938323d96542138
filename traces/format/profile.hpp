// The structural profile of a trace: the few numbers that say whether its attention looks like a real
// model's — how much mass the attention sinks take, how concentrated attention is, and how similar
// nearby queries are (CTKVR's Observation 1) — computed from the data, on a sample of layers and
// queries so it stays fast on 1M-token traces. `kvsim trace info` prints it; docs/findings.md
// compares real and synthetic traces with it.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "traces/format/trace.hpp"

namespace kvsim {

struct ProfileOptions {
  int max_layers = 4;     // stored layer slots sampled, evenly spaced (0 = all)
  int max_queries = 32;   // queries sampled for attention statistics, evenly spaced over decode steps
  int sink_tokens = 4;    // the first tokens counted as attention sinks (StreamingLLM keeps 4)
  int recent_tokens = 64; // the last tokens before a query counted as its recent window
  std::vector<int> distances = {1, 2, 4, 8, 16, 32, 64, 128, 256};  // query-cosine distances (positions)
  // Tokens [first, second) whose attention mass profile_heads also reports (a needle); {0, 0}: none.
  std::pair<int64_t, int64_t> focus{0, 0};
};

struct CosineAtDistance {
  int distance;
  double cosine;  // mean cosine similarity of query pairs this many positions apart
  int64_t pairs;  // pairs averaged (0: no pair at this distance)
};

struct TraceProfile {
  int layers_sampled = 0;
  int heads_sampled = 0;      // query heads per sampled layer
  int queries_sampled = 0;    // per head
  bool decode_queries = true; // false when the trace has no decode steps and prompt queries were used
  double sink_share = 0;      // mean attention mass on the first sink_tokens tokens
  double sink_share_uniform = 0;  // the same under uniform attention (sink_tokens / (p+1)): the baseline
  double recent_share = 0;    // mean mass on the last recent_tokens tokens up to the query
  double entropy = 0;         // mean attention entropy, nats
  double entropy_ratio = 0;   // entropy / log(p+1): 1 = uniform, near 0 = one token
  double mass90_fraction = 0; // mean fraction of the context needed to cover 90% of the mass (top tokens)
  std::vector<CosineAtDistance> cosine;  // decode queries, mean over sampled layers and heads
};

// Reads only the sampled layers (and only tokens up to the last sampled query).
TraceProfile profile_trace(const TraceSource& trace, const ProfileOptions& options = {});

// The same statistics for one stored (layer, KV head), over its query group, plus the value statistics
// attention outputs depend on. `kvsim trace fit` compares heads with these.
struct HeadProfile {
  int layer_slot = 0, kv_slot = 0;
  double sink_share = 0, recent_share = 0, entropy = 0, entropy_ratio = 0, mass90_fraction = 0;
  double focus_share = 0;      // mean mass on options.focus (0 without one)
  std::vector<double> cosine;  // at options.distances, mean over the group's query heads (0: no pair)
  double value_rms = 0;        // root mean square of the value elements (0 without values)
  double value_cosine = 0;     // mean cosine between the values of adjacent tokens
};

// Every stored KV head of the given layer slots (all stored layers when empty), in (layer, kv) order.
// Attention statistics use options.max_queries decode queries per query head, as profile_trace does.
std::vector<HeadProfile> profile_heads(const TraceSource& trace, const ProfileOptions& options,
                                       const std::vector<int>& layer_slots = {});

// Evenly spaced picks of `want` items out of `n` (all of them when want <= 0 or want >= n).
std::vector<int64_t> evenly_spaced(int64_t n, int64_t want);

}  // namespace kvsim
