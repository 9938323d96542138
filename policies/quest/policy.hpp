// quest: the faces of the policy that its registry line (policies/builtin.hpp) lists — its cost model
// (cost.cpp: memory, prefill and decode phases for the planner and simulator) and its trace selector
// (selector.cpp: the real selection on a captured or synthetic trace, for `kvsim replay`), and its
// place on the replay's one budget axis (budget.cpp).
#pragma once
#include <cstdint>
#include <memory>

#include "model/policy.hpp"
#include "policies/phase_kernels.hpp"
#include "traces/select/selector.hpp"

namespace kvsim::policies::quest {

const Policy& cost_model();
std::unique_ptr<replay::TraceSelector> make_selector(const ParamValues& p);
// Sets the knobs in `v` for a budget of `budget` tokens on a `prompt`-token prompt (budget.cpp).
bool set_budget(ParamValues& v, int64_t prompt, int64_t budget);

// The CUDA kernels that implement its GPU phases (kernels.cpp; `kvsim validate --device emu`).
PhaseKernelLinks phase_kernels();

}  // namespace kvsim::policies::quest
