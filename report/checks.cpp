#include "report/checks.hpp"

#include "core/error.hpp"

namespace kvsim::report {

using json = nlohmann::json;

namespace {

const char* shape_name(Shape s) {
  switch (s) {
    case Shape::object: return "a JSON object";
    case Shape::array: return "an array";
    case Shape::string: return "a string";
    case Shape::number: return "a number";
    case Shape::number_or_null: return "a number or null";
    case Shape::boolean: return "true or false";
  }
  return "";
}

bool fits(const json& v, Shape s) {
  switch (s) {
    case Shape::object: return v.is_object();
    case Shape::array: return v.is_array();
    case Shape::string: return v.is_string();
    case Shape::number: return v.is_number();
    case Shape::number_or_null: return v.is_number() || v.is_null();
    case Shape::boolean: return v.is_boolean();
  }
  return false;
}

std::string at(const std::string& path, const std::string& key) { return path.empty() ? key : path + "." + key; }

}  // namespace

const json& need(const json& j, const std::string& key, Shape s, const std::string& file, const std::string& path) {
  const std::string field = at(path, key);
  if (!j.contains(key)) throw_input_error(file, 0, field, "missing; allowed: " + std::string(shape_name(s)));
  const json& v = j[key];
  if (!fits(v, s)) {
    std::string shown = v.dump();
    if (shown.size() > 60) shown = shown.substr(0, 57) + "...";
    throw_input_error(file, 0, field, "value " + shown + "; allowed: " + shape_name(s));
  }
  return v;
}

std::string text_or(const json& j, const char* key, const std::string& fallback) {
  return j.is_object() && j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : fallback;
}

void check_plan(const json& plan, const std::string& file) {
  const json& cal = need(plan, "calibration", Shape::object, file, "");
  need(cal, "calibrated", Shape::boolean, file, "calibration");
  need(cal, "name", Shape::string, file, "calibration");
  const json& results = need(plan, "results", Shape::array, file, "");
  for (size_t i = 0; i < results.size(); ++i) {
    const std::string p = "results[" + std::to_string(i) + "]";
    const json& r = results[i];
    if (!r.is_object()) throw_input_error(file, 0, p, "value " + r.dump() + "; allowed: a JSON object");
    need(r, "policy", Shape::string, file, p);
    need(r, "context_tokens", Shape::number, file, p);
    need(r, "batch", Shape::number, file, p);
    need(r, "feasible", Shape::boolean, file, p);
    need(r, "tpot_ms", Shape::number_or_null, file, p);
    need(r, "ttft_ms", Shape::number_or_null, file, p);
    need(r, "throughput_tok_s", Shape::number_or_null, file, p);
    const json& mem = need(r, "memory", Shape::object, file, p);
    for (const char* k : {"hbm_bytes", "dram_bytes", "kv_hbm_bytes", "kv_dram_bytes", "weight_bytes", "workspace_bytes",
                          "hbm_usable_bytes", "max_batch"})
      need(mem, k, Shape::number, file, p + ".memory");
    const json& phases = need(r, "phases", Shape::array, file, p);
    for (size_t k = 0; k < phases.size(); ++k) {
      const std::string pp = p + ".phases[" + std::to_string(k) + "]";
      need(phases[k], "name", Shape::string, file, pp);
      need(phases[k], "stage", Shape::string, file, pp);
      need(phases[k], "time_ms", Shape::number, file, pp);
    }
    for (const char* k : {"extrapolated_phases", "unmeasured_phases", "notes"}) need(r, k, Shape::array, file, p);
  }
}

void check_serve(const json& serve, const std::string& file) {
  const json& policies = need(serve, "policies", Shape::array, file, "");
  for (size_t i = 0; i < policies.size(); ++i) {
    const std::string p = "policies[" + std::to_string(i) + "]";
    const json& r = policies[i];
    if (!r.is_object()) throw_input_error(file, 0, p, "value " + r.dump() + "; allowed: a JSON object");
    need(r, "policy", Shape::string, file, p);
    for (const char* k : {"ttft_s", "tpot_s", "e2e_s"}) {
      const json& q = need(r, k, Shape::object, file, p);
      for (const char* s : {"p50", "p99"}) need(q, s, Shape::number, file, p + "." + k);
    }
    for (const char* k : {"throughput_tok_s", "goodput_rate", "mean_batch", "preemptions", "rejected"})
      need(r, k, Shape::number, file, p);
    need(r, "overloaded", Shape::boolean, file, p);
    need(r, "slo", Shape::object, file, p);
  }
}

void check_replay(const json& replay, const std::string& file) {
  need(replay, "trace", Shape::object, file, "");
  need(replay, "scenario", Shape::object, file, "");
  const json& policies = need(replay, "policies", Shape::array, file, "");
  for (size_t i = 0; i < policies.size(); ++i) {
    const std::string p = "policies[" + std::to_string(i) + "]";
    const json& r = policies[i];
    if (!r.is_object()) throw_input_error(file, 0, p, "value " + r.dump() + "; allowed: a JSON object");
    need(r, "label", Shape::string, file, p);
    need(r, "quality", Shape::object, file, p);
    need(r, "plan", Shape::object, file, p);
  }
}

}  // namespace kvsim::report
