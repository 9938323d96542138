// Plan results for people (table) and programs (JSON schema kvsim.plan/1, CSV). Field meanings are
// defined once in docs/metrics.md; the JSON schema is docs/json-schema.md.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/plan.hpp"
#include "model/scenario.hpp"

namespace kvsim {

inline constexpr const char* kPlanSchema = "kvsim.plan/1";

nlohmann::json plan_json(const Scenario& s, const std::vector<PlanResult>& results);
// A policy's parameter values by name: numbers, or the chosen word for a parameter with choices.
nlohmann::json params_json(const Policy& policy, const ParamValues& values);
// The plan for people. By default it reads at a glance: the header, each context's table, then one line
// per policy (its bottleneck, its TPOT range and its flags counted) and a legend that says once what each
// flag means; every line fits 120 columns. `detail` adds what the glance counts: under each policy its
// range and evidence, the step's phases, the roofline bound, the phases extrapolated, unmeasured or
// priced by a kernel model, and its notes (what `kvsim plan --detail` prints). JSON keeps everything.
std::string plan_table(const Scenario& s, const std::vector<PlanResult>& results, bool detail = false);
std::string plan_csv(const Scenario& s, const std::vector<PlanResult>& results);

}  // namespace kvsim
