// Observation-window scores (SnapKV / ChunkKV / SentenceKV prefill), fast and bit-identical to
// ref::obs_window_scores: the window's G·w query rows are scored against the keys by exact_dots
// (dots.hpp: the reference's per-key channel order, SIMD across keys) in blocks of rows, so each key
// tile is transposed once for a whole block; then each row's softmax and its sum into the scores run
// in the reference's row order (g, then j) with the reference's own expressions (float exp, a double
// sum, one float inverse). Compute-bound: 2·G·w·n·d FLOPs for G·w·n exp.
#pragma once
#include <cstdint>

namespace kvsim::host {

void obs_window_scores(const float* Qw, int G, int w, const float* K, int64_t n, int d, float scale, float* scores);

}  // namespace kvsim::host
