// Observation-window scores (SnapKV / ChunkKV / SentenceKV importance; host reference).
#pragma once
#include <cstdint>

namespace kvsim::ref {

// The last w queries Qw[G, w, d] (G query heads of one KV group; G = 1 for one head) sit at positions
// n-w .. n-1 and attend causally to keys K[n, d] (query j sees keys 0 .. n-w+j). The softmax of each
// row is over everything it sees; scores[i], i in [0, n-w), is the sum of the probabilities on prefix key
// i over the window's w queries and the G heads (divide by G for SnapKV's group mean — the ranking is
// the same). Requires 0 < w <= n.
void obs_window_scores(const float* Qw, int G, int w, const float* K, int64_t n, int d, float scale, float* scores);

// SnapKV's 1-D pooling (pool_kernel k, stride 1, padding k/2, output length n): out[i] pools
// in[i - k/2 .. i - k/2 + k - 1] clipped to [0, n). avg divides by k (PyTorch avg_pool1d's default
// count_include_pad). k <= 1 copies.
enum class Pool1D { none, max, avg };
void pool1d(const float* in, int64_t n, int k, Pool1D kind, float* out);

// ChunkKV: out[ceil(n / chunk)] = Σ of token scores per chunk of `chunk` tokens (last partial).
void chunk_sum(const float* scores, int64_t n, int chunk, float* out);

}  // namespace kvsim::ref
