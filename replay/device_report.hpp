// How `kvsim replay --device cuda` shows its device check (device_check.hpp) in each format. Nothing here
// is printed with --device cpu, so that output stays as it was.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "replay/device_check.hpp"
#include "replay/replay.hpp"

namespace kvsim::replay {

// The top-level "device" block: the backend, why it was chosen, and what is said about timing.
nlohmann::json device_json(const std::string& backend, const std::string& note, bool timing_meaningful);
// A policy's "device_check" block.
nlohmann::json device_check_json(const DeviceCheck& c);
// The CSV columns appended with --device cuda, and one row's values.
std::string device_csv_header();
std::string device_csv_fields(const DeviceCheck& c);
// The table's device section: one line per policy, then which steps ran where.
std::string device_table(const std::vector<const PolicyReplay*>& policies, const std::string& note);
// What the report says about timing (the same words in every format).
std::string device_timing_text(bool timing_meaningful);

}  // namespace kvsim::replay
