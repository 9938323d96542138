// Small helpers shared by the baseline selectors (not part of the selector interface).
#pragma once
#include <string>
#include <string_view>

#include "model/error.hpp"
#include "model/policy.hpp"

namespace kvsim::replay::detail {

// The value of a cost-model parameter by name from `p` (in the order of the policy's params(); an empty
// vector means the defaults).
inline double param(std::string_view policy, const ParamValues& p, std::string_view name) {
  const Policy* pol = find_policy(policy);
  if (!pol) throw std::logic_error("no cost-model policy " + std::string(policy));
  const int i = pol->param_index(name);
  if (i < 0) throw std::logic_error(std::string(policy) + " has no parameter " + std::string(name));
  if (p.empty()) return pol->params()[size_t(i)].default_value;
  if (p.size() != pol->params().size())
    throw std::logic_error(std::string(policy) + ": " + std::to_string(p.size()) + " parameter values for " +
                           std::to_string(pol->params().size()) + " parameters");
  return p[size_t(i)];
}

}  // namespace kvsim::replay::detail
