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
std::string plan_table(const Scenario& s, const std::vector<PlanResult>& results);
std::string plan_csv(const Scenario& s, const std::vector<PlanResult>& results);

}  // namespace kvsim
