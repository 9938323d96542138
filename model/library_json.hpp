// The JSON of library entries and policies, as `kvsim hardware|host|model|policy show --format json`
// prints them: every field in SI units (bytes, bytes/s, FLOP/s, seconds), named like the YAML keys.
#pragma once
#include <nlohmann/json.hpp>

#include "model/hardware.hpp"
#include "model/host.hpp"
#include "model/model_config.hpp"
#include "model/policy.hpp"

namespace kvsim {

nlohmann::json gpu_json(const GpuSpec& g);
nlohmann::json host_json(const HostSpec& h);
nlohmann::json model_json(const ModelConfig& m);
// name, summary and every parameter: name, default (the word for a choice), range, integer, doc.
nlohmann::json policy_json(const Policy& p);

}  // namespace kvsim
