#pragma once
#include "thrust/execution_policy.h"

namespace thrust {
// first[i] = i.
template <class It>
void sequence(const device_execution_policy&, It first, It last) {
  for (decltype(*first + 0) i = 0; first != last; ++first, ++i) *first = i;
}
}  // namespace thrust
