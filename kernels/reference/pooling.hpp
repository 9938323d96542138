// Prefill summary builders (host reference): means of consecutive segments of rows X[n, d].
// Segments are given by start offsets: segment s covers rows [starts[s], starts[s+1]) and the last one
// [starts.back(), n). Starts must be strictly increasing and inside [0, n) (rows before starts[0] belong
// to no segment). Pages are the fixed-size case; sentences (SentenceKV) and spans (SEKV) variable.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

namespace kvsim::ref {

// out[S, d], S = starts.size(). Throws std::invalid_argument on bad starts.
void segment_mean(const float* X, int64_t n, int d, std::span<const int32_t> starts, float* out);
// Weighted mean Σ w_t x_t / Σ w_t per segment (SEKV's surprisal-weighted summary: weights are the
// token surprisals). A segment whose weights sum to 0 falls back to the plain mean.
void segment_weighted_mean(const float* X, const float* w, int64_t n, int d, std::span<const int32_t> starts,
                           float* out);
// Pages of page_size rows: out[ceil(n / page_size), d]; the last page averages the rows it has.
void page_mean(const float* X, int64_t n, int d, int page_size, float* out);
// Hierarchical means: groups of `group` consecutive rows of X[m, d] -> out[ceil(m / group), d]
// (CHESS: chunk = mean of N_c page vectors, grid = mean of N_g chunk vectors, eq. 2); a partial last
// group averages what exists.
void group_mean(const float* X, int64_t m, int d, int group, float* out);
// Mean of the last `w` rows of X[m, d] (all rows when w >= m) -> out[d] (CHESS's anchor, eq. 3).
void tail_mean(const float* X, int64_t m, int d, int64_t w, float* out);

// CHESS page vectors (eq. 1): for S sources (every (layer, KV head) pair, in that order), keys
// sources[s][n, d]; page vector p = concat over s of the mean of page p's keys -> out[P, S·d].
void chess_page_vectors(std::span<const float* const> sources, int64_t n, int d, int page_size, float* out);

// Segment starts of fixed-size pages: 0, page_size, 2·page_size, ... below n.
std::vector<int32_t> page_starts(int64_t n, int page_size);

}  // namespace kvsim::ref
