#include "replay/device_check.hpp"

#include <cmath>

namespace kvsim::replay {

bool same_selection(const HeadSelection& a, const HeadSelection& b) {
  if (a.all || b.all) return a.all == b.all;
  return a.tokens == b.tokens && a.extra_tokens == b.extra_tokens && a.extra_count() == b.extra_count();
}

double relative_error(const float* a, const float* b, int d) {
  double num = 0, den = 0;
  for (int c = 0; c < d; ++c) {
    num += double(a[c] - b[c]) * double(a[c] - b[c]);
    den += double(b[c]) * double(b[c]);
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

std::vector<DeviceStep> device_steps(const kernels::Backend& b) {
  std::vector<DeviceStep> out;
  for (const auto& [step, e] : b.steps().entries())
    out.push_back({kernels::step_name(step), kernels::where_name(e.where), e.calls, b.kernels(step)});
  return out;
}

}  // namespace kvsim::replay
