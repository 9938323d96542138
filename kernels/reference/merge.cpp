#include "kernels/reference/merge.hpp"

#include <cmath>
#include <vector>

#include "kernels/reference/hd.hpp"

namespace kvsim::ref {

float merge_state(const float* o_a, float lse_a, const float* o_b, float lse_b, int d, float* out) {
  float wa, wb;
  const float lse = hd::merge_weights(lse_a, lse_b, wa, wb);
  for (int c = 0; c < d; ++c) out[c] = wa * o_a[c] + wb * o_b[c];
  return lse;
}

float merge_states(const float* o, const float* lse, int n_states, int d, float* out) {
  float m = -INFINITY;
  for (int i = 0; i < n_states; ++i) m = std::fmax(m, lse[i]);
  for (int c = 0; c < d; ++c) out[c] = 0.f;
  if (!(m > -INFINITY)) return -INFINITY;
  double s = 0;
  for (int i = 0; i < n_states; ++i) s += std::exp(double(lse[i]) - m);
  for (int i = 0; i < n_states; ++i) {
    const float w = float(std::exp(double(lse[i]) - m) / s);
    for (int c = 0; c < d; ++c) out[c] += w * o[int64_t(i) * d + c];
  }
  return m + float(std::log(s));
}

}  // namespace kvsim::ref
