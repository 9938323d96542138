// Decode attention over a gathered or explicit set of key/value rows, fast (the host kernels trace
// replay and CTKVR's CPU attention phase run). Same contract as ref::gqa_gather_attention and
// ref::biased_attention — normalized out[rows, d] and lse[rows] — but outputs agree with the reference
// to float rounding, not bit for bit: nothing downstream selects on them (replay compares them with a
// tolerance), so the kernel may reorder sums.
//
// Design: the GQA group's query rows share every key/value row, so each row of K and V is read once for
// all of them (the reference reads it once per query head). With AVX-512 and d a multiple of 16, one
// pass over the keys in steps of 8: a step's logits for 4 query rows (16 lanes: 4 rows × 4 keys), the
// online-softmax update of those rows, then the step's value rows accumulated into the output, while
// rows ahead (K one step, V two) are prefetched inside the same loops, so reads overlap arithmetic.
// Otherwise blocks of 32 keys: the block's logits (AVX2), one max and one rescale per row, then the
// value rows. Bound: bytes of the K and V rows read (2·m·d·4), the exp per (row, key) and the
// 4·rows·m·d FLOPs; at head_dim 128 and a GQA group of 4 it is memory-bound on DRAM-resident rows.
#pragma once
#include <cstdint>

namespace kvsim::host {

struct AttendRows {
  const float* queries = nullptr;  // [rows, d]
  int rows = 0;
  const float *keys = nullptr, *values = nullptr;  // row i of the set: keys[key(i) * d], values[key(i) * d]
  const int32_t* idx = nullptr;                    // key(i) = idx[i], or i when null
  const float* bias = nullptr;                     // added to logit i when given (SEKV's log|S|)
  int64_t m = 0, n = 0;                            // set size; idx entries must lie in [0, n) (checked)
  int d = 0;
  float scale = 1;
  float *out = nullptr, *lse = nullptr;            // [rows, d], [rows]
};

// Throws std::out_of_range on an index outside [0, n).
void attend_rows(const AttendRows& p);

// The same over several segments at once (one softmax across all of them): each segment is `m` rows,
// at keys[key(i)]/values[key(i)] with key(i) = idx[i] or i, plus bias[i] when given. Indices are not
// checked here. SEKV's entries, which live in several arrays (span means, reconstructed spans).
struct AttendSegment {
  const float *keys = nullptr, *values = nullptr;
  const int32_t* idx = nullptr;
  const float* bias = nullptr;
  int64_t m = 0;
  // Low-rank rows instead (keys null): key i = k_us[i, k_rank]·k_vt[k_rank, d], value i likewise. The
  // logits are then k_us[i]·(k_vt·q) and the values are accumulated as Σ p_i v_us[i] (rank space) and
  // multiplied by v_vt once per segment: O(rank) per row instead of O(d). (SEKV's zoomed spans.)
  const float *k_us = nullptr, *k_vt = nullptr, *v_us = nullptr, *v_vt = nullptr;
  int k_rank = 0, v_rank = 0;
};
void attend_segments(const float* queries, int rows, const AttendSegment* segs, int nseg, int d, float scale,
                     float* out, float* lse);

}  // namespace kvsim::host

namespace kvsim::host {

// The value side of attention with known weights: out[j] = Σ_i weights[j][key(i)] · values[key(i)] for
// j < rows (rows <= 16), and mass[j] = Σ_i weights[j][key(i)] summed in double in list order. What
// replay uses to restrict the ground truth's softmax to a selection (replay.hpp: attention_kernel).
// Tokens in blocks of 32: each block's value rows stay in L1 while 8-lane FMA accumulators for up to
// three rows and a 32-channel slice stay in registers. Bound: the m·d·4 bytes of the value rows.
struct WeightedRows {
  const float* values = nullptr;      // [*, d]
  const int32_t* idx = nullptr;       // [m] row ids
  int64_t m = 0;
  int d = 0, rows = 0;
  const float* const* weights = nullptr;  // [rows] arrays indexed by row id
  float* out = nullptr;               // [rows, d]
  double* mass = nullptr;             // [rows]
  // Add to out and mass instead of overwriting them: a long list taken in pieces (replay walks the
  // value rows tile by tile so that a tile stays in cache across every selection that reads it).
  bool accumulate = false;
};
void weighted_rows(const WeightedRows& p);

}  // namespace kvsim::host
