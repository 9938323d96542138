// Rotary position embedding (RoPE), the rotate-half convention of Llama, Mistral, Qwen and Hugging
// Face's `rotate_half`: head dimension d is split into two halves, and element i (0 <= i < d/2) is
// paired with element i + d/2. Pair i turns by angle pos * w_i with w_i = theta^(-2i/d):
//   x'[i]       = x[i] cos(pos w_i) - x[i + d/2] sin(pos w_i)
//   x'[i + d/2] = x[i] sin(pos w_i) + x[i + d/2] cos(pos w_i)
// Pair 0 turns fastest (1 rad per token); pair d/2-1 slowest (about theta^-1 rad per token). Because
// each pair is a 2-D rotation, rope(q, p) . rope(k, s) depends on p and s only through p - s.
#pragma once
#include <cstdint>
#include <vector>

namespace kvsim {

// w_i = theta^(-2i/d), in double.
double rope_frequency(int pair, int head_dim, double theta);

// Rotates x[0..d) in place to position `pos`, computing each angle directly in double. The reference
// implementation; tests compare the fast path below against it.
void rope_rotate(float* x, int head_dim, int64_t pos, double theta);

// The fast path: cos/sin of pos * w_i for a run of positions. Angles are computed exactly (double
// sincos) at block anchors, positions that are multiples of kBlock, and reached inside a block by one
// complex multiplication with a precomputed table of step rotations. The result for a position
// depends only on the position (never on where a run began), so ranges requested in any order agree
// bit for bit; the error against direct sincos is ~1e-15 before rounding to float.
class RopeTable {
 public:
  static constexpr int kBlock = 64;
  RopeTable(int head_dim, double theta);
  int pairs() const { return pairs_; }
  // cos and sin (float) of pos * w_i for pos in [p0, p1): written to cs[(pos - p0) * 2 * pairs + i] (cos)
  // and cs[(pos - p0) * 2 * pairs + pairs + i] (sin). `cs` must hold (p1 - p0) * 2 * pairs floats.
  void angles(int64_t p0, int64_t p1, float* cs) const;
  // Rotates rows x[(pos - p0) * d ...] by the table written by angles() for the same range.
  void rotate_rows(float* x, int64_t rows, const float* cs) const;

 private:
  int d_, pairs_;
  std::vector<double> freq_;  // [pairs]
  std::vector<double> step_;  // [kBlock][pairs][2]: cos, sin of m * w_i, m = 0 .. kBlock-1
};

}  // namespace kvsim
