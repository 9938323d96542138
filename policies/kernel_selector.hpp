// A trace selector whose kernels run on a kernel backend (kernels/backend/backend.hpp): the host
// reference kernels by default, the optimized CUDA kernels when `kvsim replay --device cuda` hands it a CUDA
// backend. A selector derives from this instead of TraceSelector and calls kernels() where it would call
// kvsim::ref, so its selection logic is written once for both; replay finds out by dynamic_cast whether a
// selector routes its kernels this way (a selector that does not runs on the host under any device, and
// the report says so).
#pragma once
#include "kernels/backend/backend.hpp"
#include "traces/select/selector.hpp"

namespace kvsim::policies {

class KernelSelector : public replay::TraceSelector {
 public:
  // The backend must outlive the selector; call before prefill.
  void use_backend(const kernels::Backend& b) { kernels_ = &b; }

 protected:
  const kernels::Backend& kernels() const { return *kernels_; }

 private:
  const kernels::Backend* kernels_ = &kernels::host_backend();
};

}  // namespace kvsim::policies
