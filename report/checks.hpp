// Shape checks for the JSON inputs: each names the file, the field's path and what it holds, so a
// hand-edited or truncated file gets the usual located error instead of a crash in the page builder.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

namespace kvsim::report {

enum class Shape { object, array, string, number, number_or_null, boolean };

// j[key] (path names it in the message, e.g. "results[3].memory") must exist and have shape `s`.
const nlohmann::json& need(const nlohmann::json& j, const std::string& key, Shape s, const std::string& file,
                           const std::string& path);

// j[key] when j is an object holding a string there, else `fallback`: for names the page only shows.
std::string text_or(const nlohmann::json& j, const char* key, const std::string& fallback);

void check_plan(const nlohmann::json& plan, const std::string& file);
void check_serve(const nlohmann::json& serve, const std::string& file);
void check_replay(const nlohmann::json& replay, const std::string& file);

}  // namespace kvsim::report
