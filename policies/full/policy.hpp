// full: the faces of the policy that its registry line (policies/builtin.hpp) lists — its cost model
// (cost.cpp: memory, prefill and decode phases for the planner and simulator) and its trace selector
// (selector.cpp: the real selection on a captured or synthetic trace, for `kvsim replay`).
#pragma once
#include <memory>

#include "model/policy.hpp"
#include "policies/phase_kernels.hpp"
#include "traces/select/selector.hpp"

namespace kvsim::policies::full {

const Policy& cost_model();
std::unique_ptr<replay::TraceSelector> make_selector(const ParamValues& p);
// No set_budget: full attention has no budget axis (its registry line says so).

// The CUDA kernels that implement its GPU phases (kernels.cpp; `kvsim validate --device emu`).
PhaseKernelLinks phase_kernels();

}  // namespace kvsim::policies::full
