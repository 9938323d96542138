// One budget axis for every policy: "about B tokens attended per step, per layer and KV head", so the
// quality of policies whose papers size them by different knobs (a token budget, a retention ratio,
// three hierarchical ratios, a rank-and-span budget) can be compared on one x axis (`kvsim replay
// --budget-sweep`, docs/replay.md § Budgets).
//
// Each policy maps B to its own parameters the way its paper sizes it (policies/<name>/budget.cpp):
//   streaming   sinks kept, window = B - sinks
//   snapkv      budget_tokens = B (observation window included, as SnapKV counts it)
//   quest       budget_tokens = B (whole pages)
//   chunkkv     budget_tokens = B (L_max, window included)
//   sentencekv  token_budget tau = B (tau counts the always-resident sinks and recent tokens, §4.1)
//   sekv        budget_ratio = B / P (the paper's budget is a fraction of the prompt's KV); the local
//               window w is capped at B / 2 so that a small budget is not spent on the window alone
//   ctkvr       init + local tokens scaled to the paper's 5% of the context (§3.1.1: 6,528 of 131,072),
//               rho' = B - init - local, rho = 2.5 rho' (§4.1.1)
//   chess       rho_grid · rho_chunk · rho_page = (B - sink and window pages) / P, keeping the ratios'
//               proportions of Table 1's tiers: every ratio is scaled by one factor s (clamped to 1),
//               s found by bisection
// A policy whose fixed part alone exceeds B has no configuration at B (set_budget returns false).
// The tokens a policy really attends are measured by the replay and reported next to B.
#pragma once
#include <cstdint>
#include <vector>

#include "model/policy.hpp"

namespace kvsim::replay {

// True when the policy has a budget axis (its registry line has a set_budget; every policy but full).
bool has_budget(const Policy& policy);

// Sets the budget-determining parameters of `v` (the policy's parameter values, in params() order) for
// a budget of `budget` tokens on a `prompt`-token prompt. Returns false when no configuration of this
// policy attends about that few tokens.
bool set_budget(const Policy& policy, ParamValues& v, int64_t prompt, int64_t budget);

// The budgets `--budget-sweep` visits: powers of two from 64 below the prompt, then the prompt itself.
std::vector<int64_t> sweep_budgets(int64_t prompt);

}  // namespace kvsim::replay
