#pragma once
#include <algorithm>

#include "thrust/execution_policy.h"

namespace thrust {
template <class It>
void sort(const device_execution_policy&, It first, It last) {
  std::sort(first, last);
}
template <class It, class Less>
void sort(const device_execution_policy&, It first, It last, Less less) {
  std::sort(first, last, less);
}
}  // namespace thrust
