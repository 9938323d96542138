// The built-in policies, one line each, in the order `kvsim policy list` shows them. An explicit table
// rather than self-registration, because static initializers in a static library are dropped by the
// linker when nothing refers to their object file.
//
// A line names the policy's three faces (policies/registry.hpp, PolicyEntry): its cost model, its trace
// selector and its replay budget axis (nullptr for a face it does not have). Everything else about the
// policy (parameters, budget knobs, which parameters scale with the context) is in its folder.
#pragma once
#include "policies/chess/policy.hpp"
#include "policies/chunkkv/policy.hpp"
#include "policies/ctkvr/policy.hpp"
#include "policies/full/policy.hpp"
#include "policies/quest/policy.hpp"
#include "policies/registry.hpp"
#include "policies/sekv/policy.hpp"
#include "policies/sentencekv/policy.hpp"
#include "policies/snapkv/policy.hpp"
#include "policies/streaming/policy.hpp"

namespace kvsim {

inline constexpr PolicyEntry kBuiltinPolicies[] = {
    // cost model                        trace selector (nullptr: none)               budget axis (nullptr: none)   CUDA kernels of its phases
    {&policies::full::cost_model,       &policies::full::make_selector,       nullptr, &policies::full::phase_kernels},
    {&policies::streaming::cost_model,  &policies::streaming::make_selector,  &policies::streaming::set_budget, &policies::streaming::phase_kernels},
    {&policies::snapkv::cost_model,     &policies::snapkv::make_selector,     &policies::snapkv::set_budget, &policies::snapkv::phase_kernels},
    {&policies::quest::cost_model,      &policies::quest::make_selector,      &policies::quest::set_budget, &policies::quest::phase_kernels},
    {&policies::chess::cost_model,      &policies::chess::make_selector,      &policies::chess::set_budget, &policies::chess::phase_kernels},
    {&policies::sentencekv::cost_model, &policies::sentencekv::make_selector, &policies::sentencekv::set_budget, &policies::sentencekv::phase_kernels},
    {&policies::chunkkv::cost_model,    &policies::chunkkv::make_selector,    &policies::chunkkv::set_budget, &policies::chunkkv::phase_kernels},
    {&policies::sekv::cost_model,       &policies::sekv::make_selector,       &policies::sekv::set_budget},
    {&policies::ctkvr::cost_model,      &policies::ctkvr::make_selector,      &policies::ctkvr::set_budget, &policies::ctkvr::phase_kernels},
};

}  // namespace kvsim
