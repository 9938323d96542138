#include "traces/replay/budget.hpp"

#include <algorithm>
#include <cmath>
#include <string>

namespace kvsim::replay {

namespace {

// The parameter `name` of `policy` in `v`; every name used below exists (checked by the tests).
double& param(const Policy& policy, ParamValues& v, const char* name) {
  return v[size_t(policy.param_index(name))];
}

bool set_chess(const Policy& pol, ParamValues& v, int64_t P, int64_t B) {
  const double page = param(pol, v, "page_size");
  const double fixed = (param(pol, v, "sink_pages") + param(pol, v, "window_pages")) * page;
  const double f = (double(B) - fixed) / double(P);
  if (f <= 0) return false;
  const ParamValues defaults = pol.defaults();
  const char* names[3] = {"rho_grid", "rho_chunk", "rho_page"};
  double r0[3];
  for (int i = 0; i < 3; ++i) r0[i] = defaults[size_t(pol.param_index(names[i]))];
  // kept(s) = prod min(1, s r0_i) grows monotonically with s: bisect for the smallest s with kept(s) >= f.
  auto kept = [&](double s) { return std::min(1.0, s * r0[0]) * std::min(1.0, s * r0[1]) * std::min(1.0, s * r0[2]); };
  double lo = 0, hi = 1.0 / std::min({r0[0], r0[1], r0[2]});  // kept(hi) = 1
  if (f < 1)
    for (int it = 0; it < 100; ++it) {
      const double mid = 0.5 * (lo + hi);
      (kept(mid) < f ? lo : hi) = mid;
    }
  for (int i = 0; i < 3; ++i) param(pol, v, names[i]) = std::min(1.0, hi * r0[i]);
  return true;
}

}  // namespace

bool has_budget(const Policy& policy) { return policy.name() != "full"; }

bool set_budget(const Policy& pol, ParamValues& v, int64_t P, int64_t B) {
  if (B <= 0 || P <= 0) return false;
  const std::string name(pol.name());
  if (name == "streaming") {
    const double sinks = param(pol, v, "sinks");
    if (double(B) <= sinks) return false;
    param(pol, v, "window") = double(B) - sinks;
  } else if (name == "snapkv" || name == "quest" || name == "chunkkv") {
    param(pol, v, "budget_tokens") = double(B);
  } else if (name == "sentencekv") {
    const double tau = double(B) - param(pol, v, "sinks") - param(pol, v, "recent");
    if (tau < 1) return false;
    param(pol, v, "token_budget") = tau;
  } else if (name == "sekv") {
    param(pol, v, "budget_ratio") = std::min(1.0, double(B) / double(P));
    double& w = param(pol, v, "local_window");
    w = std::min(w, std::floor(double(B) / 2));
  } else if (name == "ctkvr") {
    // §3.1.1: init + local = 6,528 of 131,072 tokens (5%) on the GPU; the defaults split it 128 + 6,400.
    const double init = std::max(1.0, std::round(double(P) * 128.0 / 131072.0));
    const double local = std::max(1.0, std::round(double(P) * 6400.0 / 131072.0));
    const double rho_prime = double(B) - init - local;
    if (rho_prime < 1) return false;
    param(pol, v, "init_tokens") = init;
    param(pol, v, "local_tokens") = local;
    param(pol, v, "budget_tokens") = rho_prime;
    param(pol, v, "per_centroid") = std::ceil(2.5 * rho_prime);
  } else if (name == "chess") {
    return set_chess(pol, v, P, B);
  } else {
    return false;
  }
  return true;
}

std::vector<int64_t> sweep_budgets(int64_t P) {
  std::vector<int64_t> b;
  for (int64_t x = 64; x < P; x *= 2) b.push_back(x);
  b.push_back(P);
  return b;
}

}  // namespace kvsim::replay
