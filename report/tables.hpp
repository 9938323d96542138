// The tables the CLI prints, as HTML, from the page's data block (report_data): the plan's per-policy
// table, the serve summary, the replay's quality table and the Pareto points. Same columns and units
// as the terminal; numbers at the CLI's precision (the data block keeps full precision).
#pragma once
#include <string>

#include <nlohmann/json.hpp>

namespace kvsim::report {

std::string html_escape(const std::string& text);

std::string plan_table(const nlohmann::json& plan);
std::string serve_table(const nlohmann::json& serve);
std::string replay_table(const nlohmann::json& replay);
std::string pareto_table(const nlohmann::json& pareto);
std::string warnings_list(const nlohmann::json& warnings);

}  // namespace kvsim::report
