#pragma once
#include <iterator>

#include "thrust/execution_policy.h"

namespace thrust {
// out[i] = in[0] + ... + in[i], accumulated in the output's value type (int32 lengths summed into int64
// offsets do not overflow).
template <class In, class Out>
Out inclusive_scan(const device_execution_policy&, In first, In last, Out out) {
  using Acc = typename std::iterator_traits<Out>::value_type;
  Acc sum{};
  for (; first != last; ++first, ++out) *out = sum = sum + Acc(*first);
  return out;
}
}  // namespace thrust
