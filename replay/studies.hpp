// Studies of a trace that test a seed paper's premise on real data (`kvsim study`, docs/findings.md):
//
//   query_similarity   CTKVR Obs. 1: the cosine similarity of two query vectors (post-RoPE, same layer
//                      and query head) against their distance in positions
//   topk_overlap       CTKVR Obs. 2: for random pairs of query vectors, their cosine against the overlap
//                      of their top-k keys over the keys both can see
//   layer_jaccard      ChunkKV Table 3: the Jaccard similarity of the token indices two policies keep in
//                      adjacent layers (the premise of ChunkKV's layer-wise index reuse)
//
// Each study returns plain rows; the CLI formats them (tools/kvsim/study_cmd.cpp).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "replay/replay.hpp"

namespace kvsim::replay {

// Pairs of query rows binned by position distance [lo, hi): powers of two, 1, 2-3, 4-7, ...
struct DistanceBin {
  int64_t lo = 0, hi = 0;
  int64_t pairs = 0;         // over every stored layer and query head
  double mean = 0;           // mean cosine over those pairs
  double layer_min = 0, layer_max = 0;  // the lowest and highest per-layer mean
  double share_above = 0;    // share of pairs with cosine > threshold
};
struct QuerySimilarity {
  double threshold = 0.8;  // Obs. 1's "exceeds 0.8"
  int64_t rows = 0;        // query rows used
  std::vector<DistanceBin> bins;
};
QuerySimilarity query_similarity(const TraceData& t, double threshold = 0.8);

struct CosineBin {
  double lo = 0, hi = 0;  // cosine range [lo, hi)
  int64_t pairs = 0;
  double mean_overlap = 0;
};
struct TopkOverlap {
  double topk_fraction = 0.05;  // k = max(1, round(fraction · visible keys))
  int64_t pairs = 0;
  double pearson = 0;           // correlation of cosine and overlap over all sampled pairs
  double slope = 0, intercept = 0;  // least-squares line overlap = slope · cosine + intercept
  std::vector<CosineBin> bins;  // 10 bins of width 0.2 over [-1, 1]
};
// Samples `pairs_per_head` random pairs of distinct query rows per (stored layer, query head), seeded.
TopkOverlap topk_overlap(const TraceData& t, double topk_fraction = 0.05, int pairs_per_head = 64, uint64_t seed = 1);

struct LayerJaccard {
  std::string label;                 // the policy run's label
  std::vector<double> per_pair;      // [layer slot l] Jaccard of l and l + 1, mean over stored KV heads
  std::vector<double> first_head;    // the same for KV head slot 0 only (ChunkKV App. B.3's method)
  double mean = 0, mean_first_head = 0;
  double kept_tokens = 0;            // mean |kept| per (layer, KV head)
};
// The kept token set of each (layer, KV head) at the first decode row, per policy run; adjacent stored
// layers compared (they should be consecutive model layers: the trace's meta says which they are).
std::vector<LayerJaccard> layer_jaccard(const TraceData& t, const std::vector<PolicyRun>& runs);

}  // namespace kvsim::replay
