#include "sweep/result_row.hpp"

#include "core/csv.hpp"

namespace kvsim::sweep {

std::string results_header(const SweepSpec& spec) {
  std::string h = "point,key,policy";
  for (const AxisGroup& g : spec.groups)
    for (const Axis& a : g.axes) {
      h += ',';
      append_field(h, a.field);
    }
  h += ",params,feasible,reason,batch,max_batch,tpot_s,ttft_s,throughput_tok_s,hbm_bytes,kv_hbm_bytes,dram_bytes,"
       "kv_dram_bytes,decode_serial_s,simulated,bound";
  for (std::string_view k : kPhaseKindNames) {
    if (k == "prefill_attention" || k == "build") continue;  // never in a decode step
    h += ",decode_";
    h += k;
    h += "_s";
  }
  if (spec.trace) h += ",recall_mean,recall_p10,topk_recall,error_mean,tokens_mean";
  h += '\n';
  return h;
}

void append_row(std::string& out, const SweepSpec& spec, uint64_t point, uint64_t key, const Coords& c,
                const PointInputs& in, const PlanResult& r, const replay::Quality* q) {
  append_integer(out, int64_t(point));
  out += ',';
  append_hex(out, key);
  out += ',';
  out += in.policy->name();
  for (size_t g = 0; g < spec.groups.size(); ++g) {
    const AxisGroup& grp = spec.groups[g];
    const bool applies = grp.applies_to(in.policy);
    for (const Axis& a : grp.axes) {
      out += ',';
      if (applies && (a.kind != FieldKind::policy_param || a.policy == in.policy)) append_field(out, a.texts[c.digit[g]]);
    }
  }
  out += ',';
  const auto& specs = in.policy->params();
  for (size_t i = 0; i < specs.size(); ++i) {
    if (i) out += ';';
    out += specs[i].name;
    out += '=';
    if (!specs[i].choices.empty()) out += specs[i].choices[size_t(in.params[i])];
    else append_number(out, in.params[i]);
  }
  out += r.feasible ? ",1," : ",0,";
  append_field(out, r.reason);
  out += ',';
  if (r.feasible) {
    append_integer(out, r.batch);
    out += ',';
    append_integer(out, r.memory.max_batch);
    for (double v : {r.tpot_s, r.ttft_s, r.throughput_tok_s, r.memory.hbm_bytes, r.memory.kv_hbm_bytes,
                     r.memory.dram_bytes, r.memory.kv_dram_bytes, r.decode_serial_s}) {
      out += ',';
      append_number(out, v);
    }
    out += r.simulated ? ",1," : ",0,";
    out += to_string(r.dominant);
    double by_kind[size_t(PhaseKind::count)] = {};
    for (const PhaseResult& ph : r.decode) by_kind[size_t(ph.phase.kind)] += ph.seconds;
    for (size_t k = 0; k < size_t(PhaseKind::count); ++k) {
      if (PhaseKind(k) == PhaseKind::prefill_attention || PhaseKind(k) == PhaseKind::build) continue;
      out += ',';
      append_number(out, by_kind[k]);
    }
  } else {
    // Memory columns stay meaningful for an infeasible point (what it would need); times do not.
    out += ",";
    append_integer(out, r.memory.max_batch);
    out += ",,,";
    for (double v : {r.memory.hbm_bytes, r.memory.kv_hbm_bytes, r.memory.dram_bytes, r.memory.kv_dram_bytes}) {
      out += ',';
      append_number(out, v);
    }
    out += ",,,";
    for (size_t k = 0; k + 2 < size_t(PhaseKind::count); ++k) out += ',';
  }
  if (spec.trace) {
    if (q) {
      for (double v : {q->recall.mean, q->recall.p10, q->topk_recall.mean}) {
        out += ',';
        append_number(out, v);
      }
      out += ',';
      if (q->error) append_number(out, q->error->mean);
      out += ',';
      append_number(out, q->tokens.mean);
    } else {
      out += ",,,,,";
    }
  }
  out += '\n';
}

}  // namespace kvsim::sweep
