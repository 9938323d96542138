#pragma once
#include <algorithm>

#include "thrust/execution_policy.h"

namespace thrust {
// Removes consecutive repeats; returns the new end.
template <class It>
It unique(const device_execution_policy&, It first, It last) {
  return std::unique(first, last);
}
}  // namespace thrust
