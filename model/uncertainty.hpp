// How far an estimate can be off: an 80% range on every time the planner prints, from the validation
// errors of the evidence each phase was priced with (issue 41 item 4).
//
// Each phase's time gets a range of factors [lo, hi] (the true time lies in [t lo, t hi] for 80% of
// the cases the evidence was checked on), by the evidence that priced it:
//   a measured curve    the held-out errors of every published curve, pooled
//                       (scenarios/measurements/published-curve-errors.yaml): with e = predicted /
//                       measured - 1, lo = 1 / (1 + e_90), hi = 1 / (1 + e_10);
//   a kernel model      the same from its counted published points (kernel-model-checks.yaml);
//   a host thread law   a framework host phase (model/host_ops.hpp): from linear in cores (lo) to the
//                       law's slow fit (hi); a spread of published fits, not an 80% interval;
//   no evidence         a fallback constant (or a model with no counted point): from the bound (lo = 1:
//                       the roofline is never beaten) to kNoEvidenceHigh times it, a stated width.
// Phases priced by the same evidence (one curve, one model, the host law, no evidence) err together, so
// their deviations add; different evidence errs independently, so the groups' deviations add in
// quadrature (the 80% range of a sum of independent errors):
//   T_lo = T - sqrt(sum_g (T w_g (1 - lo_g))^2),   T_hi = T + sqrt(sum_g (T w_g (hi_g - 1))^2)
// where w_g is the group's share of the phases' serial sum (a simulated step's overlap is not
// apportioned: a phase hidden under another moves the step less than its share says, so the range is
// if anything wide). The rule was fixed and committed before any range was compared with a paper.
#pragma once
#include <array>
#include <vector>

#include "model/plan.hpp"

namespace kvsim {

struct Machine;

// The stated width for a phase with no evidence: at most this many times its bound.
inline constexpr double kNoEvidenceHigh = 4.0;

enum class Evidence : uint8_t { curve, kernel_model, host_law, none };
const char* to_string(Evidence e);

// One phase's range of factors and the evidence behind it.
struct PhaseSpread {
  Evidence evidence = Evidence::none;
  int group = 0;  // phases of one group err together (one curve kind/ceiling, one model, the law)
  double lo = 1, hi = 1;
};
PhaseSpread phase_spread(const PhaseResult& r, const Machine& m);

// The 80% range of a total `seconds` made of `phases` (the rule above).
struct TimeRange {
  double lo = 0, hi = 0;
  std::array<double, 4> share{};  // the phases' serial time by Evidence, as fractions
};
TimeRange time_range(const std::vector<PhaseResult>& phases, double seconds, const Machine& m);

// The pooled held-out errors of the published curves (p10, p90: predicted / measured - 1), read once
// from the library; points 0 when the file is missing (then a curve's range is its evidence's: none).
struct CurveErrors {
  int points = 0;
  double p10 = 0, p50 = 0, p90 = 0;
};
const CurveErrors& published_curve_errors();

}  // namespace kvsim
