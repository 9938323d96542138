// The needle part of `kvsim trace fit --needle`: how strongly the generator's retrieval heads look for a
// needle, fitted to the share of attention the real model's decode queries give it (docs/synthetic-traces.md,
// "Fitting a needle"). Everything else about the config is the main fit's.
#include <cmath>
#include <string>

#include "core/error.hpp"
#include "traces/format/profile.hpp"
#include "traces/synthetic/fit.hpp"

namespace kvsim {

namespace {

ProfileOptions needle_profile_options(std::pair<int64_t, int64_t> span) {
  ProfileOptions o;  // 32 decode queries per query head, as the main fit and trace info sample them
  o.distances = {1};
  o.focus = span;
  return o;
}

// The generator's range of needle_query_strength (synthetic_config.cpp).
constexpr double kMaxStrength = 50;
// Bisection steps: 50 / 2^14 = 0.003 nats, far below what moves the share.
constexpr int kSteps = 14;

}  // namespace

double needle_share(const TraceSource& trace, std::pair<int64_t, int64_t> span) {
  const std::vector<HeadProfile> heads = profile_heads(trace, needle_profile_options(span));
  double s = 0;
  for (const HeadProfile& h : heads) s += h.focus_share;
  return heads.empty() ? 0.0 : s / double(heads.size());
}

void fit_needle(TraceFitResult& fit, const TraceSource& real, const std::string& name, std::pair<int64_t, int64_t> span) {
  const int64_t P = real.meta().prompt_tokens;
  const auto [first, end] = span;
  if (first < 0 || end <= first || end > P)
    throw_input_error(name, 0, "needle",
                      "value '" + std::to_string(first) + ":" + std::to_string(end) +
                          "' is not a span of the prompt; allowed: FIRST:END with 0 <= FIRST < END <= " + std::to_string(P));
  const double target = needle_share(real, span);
  SyntheticConfig cfg = fit.config;
  // Depth to 6 digits, as the YAML holds it, so the config read back places the needle where this one does.
  cfg.needles = {NeedleSpec{std::round(double(first) / double(P) * 1e6) / 1e6, end - first}};
  // The generated needle starts at the first sentence boundary at depth x P: its own span, measured alike.
  auto share_at = [&](double strength) {
    cfg.needle_query_strength = strength;
    const SyntheticTrace t(cfg);
    return needle_share(t, t.needle_spans().at(0));
  };
  double lo = 0, hi = kMaxStrength, best = 0;
  const double at_lo = share_at(lo), at_hi = share_at(hi);
  if (target <= at_lo) {
    best = lo;
  } else if (target >= at_hi) {
    best = hi;
  } else {
    for (int i = 0; i < kSteps; ++i) {
      const double mid = 0.5 * (lo + hi);
      (share_at(mid) < target ? lo : hi) = mid;
    }
    best = 0.5 * (lo + hi);
  }
  best = std::round(best * 1000) / 1000;  // as the YAML holds it
  const double fitted = share_at(best);
  fit.config = cfg;
  fit.residuals.push_back({"needle_share", target, fitted});
}

}  // namespace kvsim
