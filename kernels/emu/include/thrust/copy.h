#pragma once
#include <algorithm>

#include "thrust/execution_policy.h"

namespace thrust {
// The elements x of [first, last) with pred(x), in order; returns the end of the output.
template <class In, class Out, class Pred>
Out copy_if(const device_execution_policy&, In first, In last, Out out, Pred pred) {
  return std::copy_if(first, last, out, pred);
}
}  // namespace thrust
