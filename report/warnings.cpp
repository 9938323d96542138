#include "report/warnings.hpp"

#include <algorithm>
#include <cstdio>
#include <string>

#include "core/error.hpp"
#include "report/checks.hpp"

namespace kvsim::report {

using json = nlohmann::json;

namespace {

void add(json& out, const char* source, const char* kind, const json& policy, const json& context,
         const std::string& text, const json& phases = json::array()) {
  out.push_back({{"source", source}, {"kind", kind}, {"policy", policy}, {"context_tokens", context}, {"text", text},
                 {"phases", phases}});
}

std::string where(const json& r) {
  return r["policy"].get<std::string>() + " at " + std::to_string(r["context_tokens"].get<int64_t>()) + " tokens";
}

// "name (stage, kind/ceiling at efficiency E)".
std::string unmeasured_text(const json& u) {
  auto s = [&](const char* k) { return u.contains(k) && u[k].is_string() ? u[k].get<std::string>() : std::string("?"); };
  char eff[32] = "?";
  if (u.contains("efficiency") && u["efficiency"].is_number())
    std::snprintf(eff, sizeof eff, "%.4g", u["efficiency"].get<double>());
  return s("name") + " (" + s("stage") + ", " + s("kind") + "/" + s("ceiling") + " at " + eff + ")";
}

}  // namespace

void plan_warnings(const json& plan, json& out) {
  const json& cal = plan["calibration"];
  const std::string name = cal["name"].get<std::string>();
  const std::string desc = cal.contains("description") && cal["description"].is_string()
                               ? cal["description"].get<std::string>() : std::string();
  if (cal["calibrated"].get<bool>())
    add(out, "plan", "calibration", nullptr, nullptr, "calibration in force: " + name + (desc.empty() ? "" : " — " + desc));
  else
    add(out, "plan", "calibration", nullptr, nullptr,
        "calibration in force: " + name + " — every efficiency is 1.0, so every time is a lower bound (the roofline)");
  for (const json& r : plan["results"]) {
    const json policy = r["policy"], context = r["context_tokens"];
    if (!r["feasible"].get<bool>()) {
      const std::string reason = r.contains("reason") && r["reason"].is_string() ? r["reason"].get<std::string>() : "";
      add(out, "plan", "infeasible", policy, context, where(r) + ": infeasible: " + reason);
    }
    std::vector<std::string> ex;
    for (const json& e : r["extrapolated_phases"])
      if (e.is_string()) ex.push_back(e.get<std::string>());
    if (!ex.empty())
      add(out, "plan", "extrapolated", policy, context,
          where(r) + ": efficiency read outside a calibration curve's measured range (the end value used) for " + join(ex), ex);
    // Unmeasured phases: one line per result, naming each phase and, once, where the constants came from.
    std::vector<std::string> un, texts, from;
    for (const json& u : r["unmeasured_phases"]) {
      un.push_back(text_or(u, "name", "?"));
      texts.push_back(unmeasured_text(u));
      const std::string f = text_or(u, "from", std::string());
      if (!f.empty() && std::find(from.begin(), from.end(), f) == from.end()) from.push_back(f);
    }
    if (!un.empty())
      add(out, "plan", "unmeasured", policy, context,
          where(r) + ": unmeasured phases, their binding ceiling at a fallback constant (from " + join(from) + "): " +
              join(texts), un);
    // Phases a kernel model priced (model/kernel_model.hpp): each with its model and that model's error
    // against published kernel timings, or "not checked" (plans written before the models have none).
    std::vector<std::string> modeled, mtexts;
    if (r.contains("modeled_phases") && r["modeled_phases"].is_array())
      for (const json& m : r["modeled_phases"]) {
        modeled.push_back(text_or(m, "name", "?"));
        std::string t = text_or(m, "name", "?") + " (" + text_or(m, "model", "?") + ", ";
        if (m.contains("checked_median_abs_error") && m["checked_median_abs_error"].is_number()) {
          char e[64];
          std::snprintf(e, sizeof e, "checked: median |error| %.0f%% over %d published points",
                        100 * m["checked_median_abs_error"].get<double>(),
                        m.contains("checked_points") && m["checked_points"].is_number() ? m["checked_points"].get<int>() : 0);
          t += e;
        } else {
          t += "not checked against a published kernel timing";
        }
        mtexts.push_back(t + ")");
      }
    if (!modeled.empty())
      add(out, "plan", "modeled", policy, context,
          where(r) + ": phases priced by a kernel model (no measured curve of their own): " + join(mtexts), modeled);
    for (const json& n : r["notes"])
      if (n.is_string()) add(out, "plan", "note", policy, context, where(r) + ": " + n.get<std::string>());
  }
}

void serve_warnings(const json& serve, json& out) {
  add(out, "serve", "calibration", nullptr, nullptr,
      "the serve summary does not record its calibration: its step costs used the calibration of the scenario that ran (" +
          (serve.contains("scenario") && serve["scenario"].is_string() ? serve["scenario"].get<std::string>()
                                                                       : std::string("not named")) +
          "))");
  for (const json& p : serve["policies"]) {
    const std::string name = p["policy"].get<std::string>();
    if (p["overloaded"].get<bool>()) {
      const std::string why = p.contains("overload_reason") && p["overload_reason"].is_string()
                                  ? p["overload_reason"].get<std::string>() : std::string();
      add(out, "serve", "overloaded", name, nullptr, name + ": " + (why.empty() ? std::string("overloaded") : why));
    }
    if (p["rejected"].get<double>() > 0)
      add(out, "serve", "rejected", name, nullptr,
          name + ": " + std::to_string(p["rejected"].get<int64_t>()) + " requests rejected (they never fit in memory)");
  }
}

void replay_warnings(const json& replay, json& out) {
  const json& sc = replay["scenario"];
  if (sc.contains("note") && sc["note"].is_string())
    add(out, "replay", "carried", nullptr, sc.contains("context_tokens") ? sc["context_tokens"] : json(), "replay: " + sc["note"].get<std::string>());
  add(out, "replay", "calibration", nullptr, nullptr,
      "the replay file does not record its calibration: its simulated columns used the calibration of its scenario (" +
          text_or(sc, "file", "not named") + ")");
}

void sweep_warnings(const json& sweep, json& out) {
  add(out, "sweep", "calibration", nullptr, nullptr,
      "the sweep results file " + sweep["file"].get<std::string>() +
          " does not record its calibration: its points used the calibration of the sweep spec's scenario");
}

}  // namespace kvsim::report
