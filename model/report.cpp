#include "model/report.hpp"

#include "core/csv.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>

#include "core/units.hpp"
#include "core/format.hpp"
#include "model/unverified.hpp"

namespace kvsim {

nlohmann::json params_json(const Policy& policy, const ParamValues& values) {
  nlohmann::json p = nlohmann::json::object();
  const auto& specs = policy.params();
  for (size_t i = 0; i < specs.size(); ++i) {
    if (specs[i].choices.empty()) p[specs[i].name] = values[i];
    else p[specs[i].name] = param_text(specs[i], values[i]);
  }
  return p;
}

namespace {
std::string params_text(const PlanResult& r) {
  std::string out;
  const auto& specs = r.policy->params();
  for (size_t i = 0; i < specs.size(); ++i)
    out += (out.empty() ? "" : ";") + specs[i].name + "=" + param_text(specs[i], r.params[i]);
  return out;
}

// Under a policy's row: its throughput at full KV's batch when that differs from its own (the seeds
// compare at equal batch), with the tensor-parallel degree the comparison holds at.
void at_full_batch_line(std::ostream& o, const PlanResult& r, int tp) {
  if (!r.has_at_full_batch || r.at_full_batch.batch == r.batch) return;
  const PlanResult::AtBatch& a = r.at_full_batch;
  o << "    at full KV's batch " << a.batch << " (TP " << tp << "): ";
  if (!a.feasible) {
    o << "infeasible: " << a.reason << "\n";
    return;
  }
  o << "TPOT " << fmt("%.3f", a.tpot_s * 1e3) << " ms, " << fmt("%.1f", a.throughput_tok_s) << " tok/s/GPU, "
    << fmt("%.2fx", a.throughput_vs_full) << " full's throughput (at its own batch " << r.batch << ": "
    << (r.speedup_vs_full > 0 ? fmt("%.2fx", r.speedup_vs_full) : std::string("-")) << ")\n";
}

// Under a policy's row: its index or summaries in HBM (MemoryReport::index_hbm_bytes), per sequence and
// layer and in total at the batch.
// "80% range: TPOT 24.0-31.3 ms, TTFT ..., tok/s/GPU ...; decode time by evidence: ..." (model/uncertainty.hpp).
void range_line(std::ostream& o, const PlanResult& r) {
  if (!r.feasible || !(r.tpot_hi_s > 0)) return;
  o << "    80% range (docs/uncertainty.md): TPOT " << fmt("%.3f", r.tpot_lo_s * 1e3) << "-" << fmt("%.3f", r.tpot_hi_s * 1e3)
    << " ms, TTFT " << fmt("%.1f", r.ttft_lo_s * 1e3) << "-" << fmt("%.1f", r.ttft_hi_s * 1e3) << " ms, "
    << fmt("%.1f", r.throughput_lo_tok_s()) << "-" << fmt("%.1f", r.throughput_hi_tok_s())
    << " tok/s/GPU; decode time by evidence: curves " << fmt("%.0f", 100 * r.tpot_evidence[0]) << "%, kernel models "
    << fmt("%.0f", 100 * r.tpot_evidence[1]) << "%, host thread law " << fmt("%.0f", 100 * r.tpot_evidence[2])
    << "%, none " << fmt("%.0f", 100 * r.tpot_evidence[3]) << "%\n";
}

void index_line(std::ostream& o, const PlanResult& r) {
  const MemoryReport& m = r.memory;
  if (m.index_hbm_bytes_per_seq_layer <= 0) return;
  o << "    index in HBM: " << fmt("%.2f", m.index_hbm_bytes_per_seq_layer / (1024.0 * 1024.0)) << " MiB per sequence per layer";
  if (r.batch > 0) o << ", " << fmt("%.2f", m.index_hbm_bytes / kGiB) << " GiB at batch " << r.batch << " over all layers";
  o << "\n";
}

// "kind/ceiling" of an unmeasured phase, as the text and the CSV name it.
std::string kind_ceiling(const UnmeasuredPhase& u) {
  return std::string(to_string(u.kind)) + "/" + std::string(kCeilingNames[size_t(u.ceiling)]);
}

// The phases a fallback constant timed (PlanResult::unmeasured_phases), one entry each.
std::string unmeasured_text(const UnmeasuredPhase& u) {
  std::string t = std::string(u.name) + " (" + kind_ceiling(u) + ": constant " + fmt("%.2f", u.constant) + " from " + u.from;
  if (u.efficiency < 0.995 * u.constant) t += ", x" + fmt("%.2f", u.efficiency / u.constant) + " gather run-length estimate";
  return t + ")";
}

void unmeasured_line(std::ostream& o, const std::vector<UnmeasuredPhase>& un) {
  if (un.empty()) return;
  o << "    unmeasured (fallback efficiency, no kernel measurement):";
  for (size_t i = 0; i < un.size(); ++i) o << (i ? "; " : " ") << unmeasured_text(un[i]);
  o << "\n";
}

// How a kernel model's check reads: "torch_topk, checked: median |error| 31% over 10 published points".
std::string model_check_text(KernelModelId id) {
  const KernelModelCheck& c = kernel_model_check(id);
  std::string t(to_string(id));
  if (c.counted == 0) return t + ", not checked against a published kernel timing";
  return t + ", checked: median |error| " + fmt("%.0f%%", 100 * c.median_abs_error) + " over " +
         std::to_string(c.counted) + " published points";
}

// The phases a kernel model priced (PlanResult::modeled_phases), one line.
void modeled_line(std::ostream& o, const std::vector<ModeledPhase>& ms) {
  if (ms.empty()) return;
  o << "    kernel models (no measured curve of their own; docs/validation/kernel-models.md):";
  for (size_t i = 0; i < ms.size(); ++i)
    o << (i ? "; " : " ") << ms[i].name << " (" << model_check_text(ms[i].model)
      << (ms[i].class_curve ? "" : "; its class curve unmeasured on this GPU") << ")";
  o << "\n";
}

nlohmann::json modeled_json(const std::vector<ModeledPhase>& ms) {
  nlohmann::json a = nlohmann::json::array();
  for (const ModeledPhase& m : ms) {
    const KernelModelCheck& c = kernel_model_check(m.model);
    a.push_back({{"name", std::string(m.name)},
                 {"stage", std::string(m.stage)},
                 {"model", std::string(to_string(m.model))},
                 {"class_curve_measured", m.class_curve},
                 {"checked_points", c.counted},
                 {"checked_median_abs_error", c.counted ? nlohmann::json(c.median_abs_error) : nlohmann::json(nullptr)}});
  }
  return a;
}

// The 80% ranges (model/uncertainty.hpp): from the validation errors of each phase's evidence. The max
// batch is the memory model's, which has no timing in it: its range is the point.
void add_range_json(nlohmann::json& e, const PlanResult& r) {
  using nlohmann::json;
  auto v = [&](double x) { return r.feasible ? json(x) : json(nullptr); };
  e["tpot_ms_low"] = v(r.tpot_lo_s * 1e3);
  e["tpot_ms_high"] = v(r.tpot_hi_s * 1e3);
  e["ttft_ms_low"] = v(r.ttft_lo_s * 1e3);
  e["ttft_ms_high"] = v(r.ttft_hi_s * 1e3);
  e["throughput_tok_s_low"] = v(r.throughput_lo_tok_s());
  e["throughput_tok_s_high"] = v(r.throughput_hi_tok_s());
  e["max_batch_low"] = r.memory.max_batch;
  e["max_batch_high"] = r.memory.max_batch;
  e["tpot_evidence"] = r.feasible ? json{{"curve", r.tpot_evidence[0]},
                                         {"kernel_model", r.tpot_evidence[1]},
                                         {"host_law", r.tpot_evidence[2]},
                                         {"none", r.tpot_evidence[3]}}
                                  : json(nullptr);
}

nlohmann::json unmeasured_json(const std::vector<UnmeasuredPhase>& un) {
  nlohmann::json a = nlohmann::json::array();
  for (const UnmeasuredPhase& u : un)
    a.push_back({{"name", std::string(u.name)},
                 {"stage", std::string(u.stage)},
                 {"kind", std::string(to_string(u.kind))},
                 {"ceiling", std::string(kCeilingNames[size_t(u.ceiling)])},
                 {"constant", u.constant},
                 {"efficiency", u.efficiency},
                 {"from", u.from}});
  return a;
}

}  // namespace

nlohmann::json plan_json(const Scenario& s, const std::vector<PlanResult>& results) {
  using nlohmann::json;
  json j;
  j["schema"] = kPlanSchema;
  j["scenario"] = s.file;
  j["hardware"] = s.gpu.name;
  j["host"] = s.host.name;
  j["model"] = s.model.name;
  j["calibration"] = {{"name", s.calibration.name},
                      {"calibrated", s.calibration.calibrated},
                      {"description", s.calibration.description}};
  // Constants in force that no primary source confirmed (model/unverified.hpp).
  json un = json::array();
  for (const UnverifiedConstant& u : unverified_in_force(s.gpu.name, s.host.name))
    un.push_back({{"file", u.file}, {"key", u.key}, {"line", u.line}, {"note", u.note}});
  j["unverified_constants"] = un;
  const Workload& w = s.workload;
  j["workload"] = {{"output_tokens", w.output_tokens},
                   {"tensor_parallel", w.tensor_parallel},
                   {"weight_dtype", std::string(to_string(w.weight_dtype))},
                   {"kv_dtype", std::string(to_string(w.kv_dtype))},
                   {"hbm_utilization", w.hbm_utilization},
                   {"prefill_chunk_tokens", w.prefill_chunk_tokens},
                   {"cuda_graphs", w.cuda_graphs}};
  json arr = json::array();
  for (const PlanResult& r : results) {
    json e;
    e["policy"] = std::string(r.policy->name());
    e["params"] = params_json(*r.policy, r.params);
    e["context_tokens"] = r.context_tokens;
    e["output_tokens"] = r.output_tokens;
    e["batch"] = r.batch;
    e["feasible"] = r.feasible;
    e["reason"] = r.feasible ? json(nullptr) : json(r.reason);
    e["tpot_ms"] = r.feasible ? json(r.tpot_s * 1e3) : json(nullptr);
    e["ttft_ms"] = r.feasible ? json(r.ttft_s * 1e3) : json(nullptr);
    e["throughput_tok_s"] = r.feasible ? json(r.throughput_tok_s) : json(nullptr);
    add_range_json(e, r);
    e["dominant_bound"] = r.feasible ? json(std::string(to_string(r.dominant))) : json(nullptr);
    e["decode_context_tokens"] = r.feasible ? json(r.decode_context) : json(nullptr);
    e["decode_serial_ms"] = r.feasible ? json(r.decode_serial_s * 1e3) : json(nullptr);
    e["simulated"] = r.simulated;
    auto ratio = [&](double v) { return r.feasible && v > 0 ? json(v) : json(nullptr); };
    e["vs_full"] = {{"throughput", ratio(r.speedup_vs_full)},
                    {"tpot_speedup", ratio(r.tpot_speedup_vs_full)},
                    {"kv_hbm_per_seq", ratio(r.kv_hbm_vs_full)}};
    // The same policy at full KV's batch (equal batch, as the seeds compare); null when there is no
    // feasible full-KV reference at this context or this result is infeasible.
    if (r.has_at_full_batch) {
      const auto& a = r.at_full_batch;
      e["at_full_batch"] = {{"batch", a.batch},
                            {"feasible", a.feasible},
                            {"reason", a.feasible ? json(nullptr) : json(a.reason)},
                            {"tpot_ms", a.feasible ? json(a.tpot_s * 1e3) : json(nullptr)},
                            {"throughput_tok_s", a.feasible ? json(a.throughput_tok_s) : json(nullptr)},
                            {"throughput_vs_full", a.feasible ? json(a.throughput_vs_full) : json(nullptr)}};
    } else {
      e["at_full_batch"] = nullptr;
    }
    const MemoryReport& m = r.memory;
    e["memory"] = {{"hbm_bytes", m.hbm_bytes},         {"dram_bytes", m.dram_bytes},
                   {"kv_hbm_bytes", m.kv_hbm_bytes},   {"kv_dram_bytes", m.kv_dram_bytes},
                   {"index_hbm_bytes", m.index_hbm_bytes},
                   {"index_hbm_bytes_per_seq_layer", m.index_hbm_bytes_per_seq_layer},
                   {"weight_bytes", m.weight_bytes},   {"workspace_bytes", m.workspace_bytes},
                   {"hbm_usable_bytes", m.hbm_usable}, {"dram_usable_bytes", m.dram_usable},
                   {"max_batch", m.max_batch}};
    json phases = json::array();
    for (const auto* list : {&r.prefill, &r.decode}) {
      for (const PhaseResult& p : *list) {
        const Work& wk = p.phase.work;
        phases.push_back({{"name", std::string(p.phase.name)},
                          {"stage", std::string(p.stage)},
                          {"kind", std::string(to_string(p.phase.kind))},
                          {"device", std::string(to_string(p.phase.device))},
                          {"time_ms", p.seconds * 1e3},
                          {"bound", std::string(to_string(p.bound))},
                          {"flops", wk.flops},
                          {"hbm_bytes", wk.hbm_bytes},
                          {"dram_bytes", wk.dram_bytes},
                          {"h2d_bytes", wk.h2d_bytes},
                          {"d2h_bytes", wk.d2h_bytes},
                          {"link_bytes", wk.link_bytes},
                          {"launches", wk.launches},
                          {"extrapolated", p.extrapolated},
                          {"kernel_model", p.kernel == KernelModelId::none ? nlohmann::json(nullptr)
                                                                          : nlohmann::json(std::string(to_string(p.kernel)))}});
      }
    }
    e["phases"] = phases;
    // The estimate above is under the calibration in force; the bound is the roofline (efficiencies
    // 1.0) at the same batch. null when the calibration is the roofline itself.
    e["bound"] = r.has_bound ? json{{"tpot_ms", r.bound_tpot_s * 1e3},
                                    {"ttft_ms", r.bound_ttft_s * 1e3},
                                    {"throughput_tok_s", r.bound_throughput_tok_s}}
                             : json(nullptr);
    json ex = json::array();
    for (const auto& n : r.extrapolated_phases()) ex.push_back(n);
    e["extrapolated_phases"] = ex;
    e["unmeasured_phases"] = unmeasured_json(r.unmeasured_phases(s.calibration));
    e["modeled_phases"] = modeled_json(r.modeled_phases());
    e["notes"] = r.notes;
    arr.push_back(e);
  }
  j["results"] = arr;
  return j;
}

namespace {
// The glance's line for one policy: "  quest       hbm: mlp 46%, page_bound 14% | TPOT 8.30-13.57 ms (80%) |
// 6 extrapolated, 3 kernel models". Pieces are dropped from the right of each part until it fits.
std::string glance_line(const Scenario& s, const PlanResult& r) {
  constexpr size_t kWidth = 120;
  char head[64];
  std::snprintf(head, sizeof head, "  %-11s ", std::string(r.policy->name()).c_str());
  const std::string name = head;
  if (!r.feasible) return name + "infeasible (largest batch that fits: " + std::to_string(r.memory.max_batch) + ")";
  std::vector<const PhaseResult*> ph;
  for (const auto& p : r.decode) ph.push_back(&p);
  std::stable_sort(ph.begin(), ph.end(), [](auto* a, auto* b) { return a->seconds > b->seconds; });
  std::vector<std::string> top;
  for (size_t i = 0; i < ph.size() && i < 2; ++i)
    if (i == 0 || ph[i]->seconds >= 0.05 * r.tpot_s)
      top.push_back(std::string(ph[i]->phase.name) + " " + fmt("%.0f%%", 100 * ph[i]->seconds / r.tpot_s));
  std::vector<std::string> flags;
  const auto count = [&](size_t n, const char* one, const char* many) {
    if (n) flags.push_back(std::to_string(n) + " " + (n == 1 ? one : many));
  };
  count(r.extrapolated_phases().size(), "extrapolated", "extrapolated");
  count(r.unmeasured_phases(s.calibration).size(), "unmeasured", "unmeasured");
  count(r.modeled_phases().size(), "kernel model", "kernel models");
  count(r.notes.size(), "note", "notes");
  const std::string range = r.tpot_hi_s > 0 ? "TPOT " + fmt("%.2f", r.tpot_lo_s * 1e3) + "-" + fmt("%.2f", r.tpot_hi_s * 1e3) + " ms (80%)" : "";
  for (;;) {
    std::string line = name + std::string(to_string(r.dominant)) + ":";
    for (size_t i = 0; i < top.size(); ++i) line += (i ? ", " : " ") + top[i];
    if (!range.empty()) line += " | " + range;
    if (!flags.empty()) {
      line += " |";
      for (size_t i = 0; i < flags.size(); ++i) line += (i ? ", " : " ") + flags[i];
    }
    if (line.size() <= kWidth || (top.size() <= 1 && flags.empty())) return line;
    if (top.size() > 1) top.pop_back();
    else flags.pop_back();
  }
}

// The legend under the glance: each flag said once, then where the rest is.
void glance_legend(std::ostream& o, bool calibrated) {
  o << "\nbound: what the decode step waits on longest, then its largest phases"
    << (calibrated ? "; TPOT range: 80% odds (docs/uncertainty.md).\n" : ".\n");
  o << "extrapolated: efficiency read outside its measured range; unmeasured: a fallback constant, no kernel measurement;\n"
       "kernel model: priced by docs/validation/kernel-models.md; notes: the policy's own caveats.\n"
       "--detail: every phase, range, bound and note under each policy; --format json keeps every field.\n";
}
}  // namespace

std::string plan_table(const Scenario& s, const std::vector<PlanResult>& results, bool detail) {
  std::ostringstream o;
  const Workload& w = s.workload;
  o << "kvsim plan: " << s.model.name << " (" << fmt("%.2f", s.model.total_params() / 1e9) << "B params) on "
    << s.gpu.name << " + host " << s.host.name << ", TP " << w.tensor_parallel << ", weights "
    << to_string(w.weight_dtype) << ", KV " << to_string(w.kv_dtype) << "\n";
  const std::vector<UnverifiedConstant> unverified = unverified_in_force(s.gpu.name, s.host.name);
  if (!detail) {
    o << "calibration: " << s.calibration.name
      << (s.calibration.calibrated ? " (estimates; --detail for its sources and the roofline bound)"
                                   : " (uncalibrated: efficiencies 1.0, times are lower bounds)");
    if (!unverified.empty())
      o << "\n" << unverified.size() << " unverified constant" << (unverified.size() > 1 ? "s" : "")
        << " in force (no primary source): --detail names them";
    o << "\n";
  } else {
    o << "calibration: " << s.calibration.name
      << (s.calibration.calibrated ? " (estimates; the roofline bound is shown under each policy; --calibration roofline for the bound alone)"
                                   : " (uncalibrated: efficiencies 1.0, times are lower bounds)")
      << "\n";
    if (s.calibration.calibrated && !s.calibration.description.empty())
      o << "  " << s.calibration.description << "\n";
    if (!unverified.empty()) {
      o << "unverified constants in force (no primary source; the file's comment says why):";
      for (size_t i = 0; i < unverified.size(); ++i)
        o << (i ? ";" : "") << " " << unverified[i].file << ":" << unverified[i].line << " " << unverified[i].key;
      o << "\n";
    }
  }
  int64_t last_ctx = -1;
  std::vector<const PlanResult*> context_rows;  // the glance lines of the context being printed
  const auto flush_glance = [&] {
    if (detail || context_rows.empty()) return;
    o << "\n";
    for (const PlanResult* r : context_rows) o << glance_line(s, *r) << "\n";
    context_rows.clear();
  };
  for (const PlanResult& r : results) {
    if (r.context_tokens != last_ctx) {
      flush_glance();
      last_ctx = r.context_tokens;
      o << "\ncontext " << r.context_tokens << " + " << r.output_tokens << " output tokens, TP " << w.tensor_parallel
        << (detail ? " (xput/full: each at its own batch; \"at full KV's batch\" lines: at equal batch)\n"
                   : " (xput/full: each at its own batch)\n");
      char head[200];
      std::snprintf(head, sizeof head, "  %-12s %6s %6s %9s %10s %11s %8s %8s %8s %8s  %s\n", "policy", "batch", "max",
                    "TPOT ms", "TTFT ms", "tok/s/GPU", "xput/full", "KV/full", "HBM GiB", "KV GiB", "bound");
      o << head;
    }
    char row[256];
    if (!detail) context_rows.push_back(&r);
    if (!r.feasible) {
      std::snprintf(row, sizeof row, "  %-12s %6s %6lld  infeasible: ", std::string(r.policy->name()).c_str(), "-",
                    (long long)r.memory.max_batch);
      o << row << r.reason << "\n";
      if (!detail) continue;
      index_line(o, r);
      for (const auto& n : r.notes) o << "    note: " << n << "\n";
      continue;
    }
    auto ratio = [](double v, const char* f) { return v > 0 ? fmt(f, v) : std::string("-"); };
    std::snprintf(row, sizeof row, "  %-12s %6lld %6lld %9.3f %10.1f %11.1f %8s %8s %8.2f %8.2f  %s\n",
                  std::string(r.policy->name()).c_str(), (long long)r.batch, (long long)r.memory.max_batch,
                  r.tpot_s * 1e3, r.ttft_s * 1e3, r.throughput_tok_s, ratio(r.speedup_vs_full, "%.2fx").c_str(),
                  ratio(r.kv_hbm_vs_full, "%.3f").c_str(), r.memory.hbm_bytes / kGiB,
                  (r.memory.kv_hbm_bytes + r.memory.kv_dram_bytes) / kGiB, std::string(to_string(r.dominant)).c_str());
    o << row;
    if (!detail) continue;
    range_line(o, r);
    at_full_batch_line(o, r, w.tensor_parallel);
    index_line(o, r);
    // Phase breakdown of the decode step, largest first.
    std::vector<const PhaseResult*> ph;
    for (const auto& p : r.decode) ph.push_back(&p);
    std::stable_sort(ph.begin(), ph.end(), [](auto* a, auto* b) { return a->seconds > b->seconds; });
    if (r.simulated)
      o << "    simulated step " << fmt("%.3f", r.tpot_s * 1e3) << " ms; phases alone sum to "
        << fmt("%.3f", r.decode_serial_s * 1e3) << " ms (overlap hides " << fmt("%.0f", std::max(0.0, 100 * (1 - r.tpot_s / r.decode_serial_s)))
        << "%)\n";
    o << "    decode step:";
    for (const PhaseResult* p : ph) {
      o << " " << p->phase.name << " " << fmt("%.3f", p->seconds * 1e3) << " ms (" << fmt("%.0f", 100 * p->seconds / r.tpot_s)
        << "%, " << to_string(p->bound) << ")";
    }
    o << "\n";
    if (r.has_bound)
      o << "    roofline bound: TPOT " << fmt("%.3f", r.bound_tpot_s * 1e3) << " ms, TTFT " << fmt("%.1f", r.bound_ttft_s * 1e3)
        << " ms, " << fmt("%.1f", r.bound_throughput_tok_s) << " tok/s/GPU (estimate / bound: TPOT "
        << fmt("%.2fx", r.tpot_s / r.bound_tpot_s) << ")\n";
    const auto ex = r.extrapolated_phases();
    if (!ex.empty()) {
      o << "    outside the calibrated range (efficiency extrapolated, not measured):";
      for (const auto& n : ex) o << " " << n;
      o << "\n";
    }
    unmeasured_line(o, r.unmeasured_phases(s.calibration));
    modeled_line(o, r.modeled_phases());
    for (const auto& n : r.notes) o << "    note: " << n << "\n";
  }
  flush_glance();
  if (!detail && !results.empty()) glance_legend(o, s.calibration.calibrated);
  return o.str();
}

std::string plan_csv(const Scenario& s, const std::vector<PlanResult>& results) {
  std::ostringstream o;
  o << "policy,params,context_tokens,output_tokens,batch,feasible,reason,tpot_ms,ttft_ms,throughput_tok_s,"
       "dominant_bound,hbm_bytes,dram_bytes,kv_hbm_bytes,kv_dram_bytes,max_batch,throughput_vs_full,kv_hbm_per_seq_vs_full,"
       "bound_tpot_ms,bound_ttft_ms,bound_throughput_tok_s,extrapolated_phases,unmeasured_phases,tensor_parallel,index_hbm_bytes,"
       "index_hbm_bytes_per_seq_layer,at_full_batch,at_full_batch_tpot_ms,at_full_batch_throughput_tok_s,"
       "at_full_batch_throughput_vs_full,tpot_ms_low,tpot_ms_high,ttft_ms_low,ttft_ms_high,throughput_tok_s_low,"
       "throughput_tok_s_high\n";
  char buf[64];
  auto num = [&](double v) {
    std::snprintf(buf, sizeof buf, "%.9g", v);
    return std::string(buf);
  };
  for (const PlanResult& r : results) {
    o << r.policy->name() << "," << csv_field(params_text(r)) << "," << r.context_tokens << "," << r.output_tokens << ","
      << r.batch << "," << (r.feasible ? "true" : "false") << "," << csv_field(r.reason) << ","
      << (r.feasible ? num(r.tpot_s * 1e3) : "") << "," << (r.feasible ? num(r.ttft_s * 1e3) : "") << ","
      << (r.feasible ? num(r.throughput_tok_s) : "") << "," << (r.feasible ? std::string(to_string(r.dominant)) : "")
      << "," << num(r.memory.hbm_bytes) << "," << num(r.memory.dram_bytes) << "," << num(r.memory.kv_hbm_bytes) << ","
      << num(r.memory.kv_dram_bytes) << "," << r.memory.max_batch << ","
      << (r.speedup_vs_full > 0 ? num(r.speedup_vs_full) : "") << "," << (r.kv_hbm_vs_full > 0 ? num(r.kv_hbm_vs_full) : "")
      << "," << (r.has_bound ? num(r.bound_tpot_s * 1e3) : "") << "," << (r.has_bound ? num(r.bound_ttft_s * 1e3) : "")
      << "," << (r.has_bound ? num(r.bound_throughput_tok_s) : "") << ",";
    std::string ex;
    for (const auto& n : r.extrapolated_phases()) ex += (ex.empty() ? "" : ";") + n;
    std::string un;
    for (const UnmeasuredPhase& u : r.unmeasured_phases(s.calibration)) {
      // Appended piece by piece: GCC 12 misreads `(cond ? "" : ";") + string` here as an overlapping
      // memcpy (-Wrestrict, GCC bug 105329).
      if (!un.empty()) un += ';';
      un.append(u.name).append("=").append(kind_ceiling(u)).append("@").append(fmt("%.4g", u.efficiency));
    }
    const PlanResult::AtBatch& a = r.at_full_batch;
    const bool at = r.has_at_full_batch && a.feasible;
    o << csv_field(ex) << "," << csv_field(un) << "," << s.workload.tensor_parallel << "," << num(r.memory.index_hbm_bytes) << ","
      << num(r.memory.index_hbm_bytes_per_seq_layer) << "," << (r.has_at_full_batch ? std::to_string(a.batch) : "")
      << "," << (at ? num(a.tpot_s * 1e3) : "") << "," << (at ? num(a.throughput_tok_s) : "") << ","
      << (at ? num(a.throughput_vs_full) : "") << "," << (r.feasible ? num(r.tpot_lo_s * 1e3) : "") << ","
      << (r.feasible ? num(r.tpot_hi_s * 1e3) : "") << "," << (r.feasible ? num(r.ttft_lo_s * 1e3) : "") << ","
      << (r.feasible ? num(r.ttft_hi_s * 1e3) : "") << "," << (r.feasible ? num(r.throughput_lo_tok_s()) : "") << ","
      << (r.feasible ? num(r.throughput_hi_tok_s()) : "") << "\n";
  }
  return o.str();
}

}  // namespace kvsim
