// The warnings a report shows above its charts: the calibration in force (or that an input does not
// record one), every phase whose efficiency was extrapolated past a measured curve or ran at an
// unmeasured fallback constant, the policies' own notes, infeasible design points, overloaded serving
// runs, and a replay's carry of statistics to another context. A reader should not need the JSON to
// learn how far to trust a number.
#pragma once
#include <nlohmann/json.hpp>

namespace kvsim::report {

// Appends to `out` (an array of {"source", "kind", "policy", "context_tokens", "text", "phases"}); kind
// is one of calibration, extrapolated, unmeasured, note, infeasible, overloaded, rejected, carried;
// "phases" names the phases of an extrapolated or unmeasured warning (one warning per result and kind).
void plan_warnings(const nlohmann::json& plan, nlohmann::json& out);
void serve_warnings(const nlohmann::json& serve, nlohmann::json& out);
void replay_warnings(const nlohmann::json& replay, nlohmann::json& out);
void sweep_warnings(const nlohmann::json& sweep, nlohmann::json& out);

}  // namespace kvsim::report
