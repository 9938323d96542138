#include "model/plan.hpp"

#include "model/uncertainty.hpp"

#include "model/library.hpp"
#include "model/scenario.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <string_view>
#include <cmath>
#include <cstdio>

#include "core/units.hpp"
#include "model/decode_graph.hpp"
#include "model/resources.hpp"
#include "model/step_simulation.hpp"

namespace kvsim {

namespace {
std::string gib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GiB", bytes / kGiB);
  return buf;
}

// Activations live during a prefill chunk in one layer (input, qkv, attention output, gate/up,
// activation): the workspace a serving engine reserves regardless of batch. With chunked prefill it
// is sized for a whole chunk; an implementation that prefills the whole prompt in one pass (Hugging
// Face) needs it for the whole prompt.
double workspace_fixed(const Deployment& d, double prompt) {
  const ModelConfig& m = *d.model;
  const double c = d.prefill_chunk_tokens > 0 ? double(d.prefill_chunk_tokens) : prompt;
  return c * (m.hidden + (d.hq + 2 * d.hkv) * m.head_dim + d.hq * m.head_dim + 3 * d.ffn) * d.ba;
}
// fp32 logits of one sequence for sampling.
double workspace_per_seq(const Deployment& d) { return d.vocab * 4; }

double sum_phases(const Deployment& d, const PhaseList& phases, std::string_view stage,
                  std::vector<PhaseResult>* out) {
  double total = 0;
  if (out) out->reserve(out->size() + phases.size());
  for (const Phase& ph : phases) {
    const PhaseTime t = roofline(ph, d.machine);
    total += t.seconds;
    if (out) out->push_back({ph, stage, t.seconds, t.bound, t.extrapolated, t.ceiling, t.curve, t.kernel, t.kernel_class_curve});
  }
  return total;
}
}  // namespace

MemoryReport plan_memory(const DesignPoint& p, std::string* reason) {
  const Deployment& d = *p.deployment;
  const MemoryDemand need =
      p.policy->memory(d, *p.params, double(p.context_tokens), double(p.output_tokens));
  MemoryReport r;
  r.weight_bytes = d.weight_bytes();
  r.hbm_usable = d.gpu->hbm_capacity_bytes * d.hbm_utilization;
  // The tensor-parallel GPUs share one host; each holds its share of the offloaded KV there.
  r.dram_usable = d.host->dram_capacity_bytes / d.tp;
  const double ws_fixed = workspace_fixed(d, double(p.context_tokens));
  const double hbm_free = r.hbm_usable - r.weight_bytes - ws_fixed - need.hbm_fixed;
  const double hbm_per_seq = need.hbm_per_seq + workspace_per_seq(d);
  const double dram_free = r.dram_usable - need.dram_fixed;
  constexpr double kUnbounded = 1e9;
  double max_b = hbm_free > 0 ? std::floor(hbm_free / hbm_per_seq) : 0;
  if (need.dram_per_seq > 0) max_b = std::min(max_b, dram_free > 0 ? std::floor(dram_free / need.dram_per_seq) : 0);
  r.max_batch = int64_t(std::min(max_b, kUnbounded));
  const double b = p.batch > 0 ? double(p.batch) : double(r.max_batch);
  r.workspace_bytes = ws_fixed + b * workspace_per_seq(d);
  r.kv_hbm_bytes = b * need.kv_hbm_per_seq;
  r.kv_dram_bytes = b * need.kv_dram_per_seq;
  r.index_hbm_bytes = b * need.index_hbm_per_seq;
  r.index_hbm_bytes_per_seq_layer = d.model->layers > 0 ? need.index_hbm_per_seq / double(d.model->layers) : 0;
  r.hbm_bytes = r.weight_bytes + ws_fixed + need.hbm_fixed + b * hbm_per_seq;
  r.dram_bytes = need.dram_fixed + b * need.dram_per_seq;
  if (reason) {
    reason->clear();
    const std::string tokens = std::to_string(p.context_tokens) + "+" + std::to_string(p.output_tokens);
    if (hbm_free <= 0) {
      *reason = "weights (" + gib(r.weight_bytes) + ") + workspace (" + gib(ws_fixed) + ")" +
                (need.hbm_fixed > 0 ? " + policy state (" + gib(need.hbm_fixed) + ")" : "") +
                " exceed usable HBM (" + gib(r.hbm_usable) + ")";
    } else if (r.max_batch < 1 && need.dram_per_seq > 0 && dram_free < need.dram_per_seq) {
      *reason = "one sequence needs " + gib(need.dram_per_seq) + " of host DRAM at " + tokens +
                " tokens but " + gib(std::max(0.0, dram_free)) + " is available";
    } else if (r.max_batch < 1) {
      *reason = "one sequence needs " + gib(hbm_per_seq) + " of HBM at " + tokens + " tokens but only " +
                gib(hbm_free) + " is left after weights and workspace";
    } else if (p.batch > r.max_batch) {
      *reason = "batch " + std::to_string(p.batch) + " needs " + gib(r.hbm_bytes) + " of HBM (usable " +
                gib(r.hbm_usable) + "); the largest batch that fits is " + std::to_string(r.max_batch);
    }
  }
  return r;
}

namespace {
std::atomic<int>& full_step_flag() {
  static std::atomic<int> on{[] {
    const char* e = std::getenv("KVSIM_FULL_STEP_SIM");
    return e && *e && std::string_view(e) != "0" ? 1 : 0;
  }()};
  return on;
}
}  // namespace

void set_full_step_simulation(bool on) { full_step_flag() = on ? 1 : 0; }
bool full_step_simulation() { return full_step_flag() != 0; }

void decode_phase_lists(const Deployment& d, const Policy& pol, const ParamValues& params, const StepShape& shape,
                        PhaseList& policy_phases, PhaseList& dense_phases) {
  pol.decode_attention(d, params, shape, policy_phases);
  add_decode_dense_phases(d, shape.batch, dense_phases);
  // The step's shape on every phase, for efficiency curves measured against context or batch.
  for (PhaseList* l : {&policy_phases, &dense_phases})
    for (Phase& ph : *l) ph.context_tokens = shape.context(), ph.batch = shape.batch;
}

namespace {
// decode_step's body; without `serial` (decode_step_time) a simulated step skips the phases' rooflines
// that only its serial sum needs.
StepResult decode_step_impl(const Deployment& d, const Policy& pol, const ParamValues& params, const StepShape& shape,
                            bool keep_phases, const std::vector<std::string>* without, bool serial) {
  PhaseList policy_phases, dense;
  policy_phases.reserve(12);
  dense.reserve(8);
  decode_phase_lists(d, pol, params, shape, policy_phases, dense);
  if (without)
    for (Phase& ph : policy_phases)
      if (std::find(without->begin(), without->end(), ph.name) != without->end()) ph.work = Work{};
  StepResult r;
  std::vector<PhaseResult>* out = keep_phases ? &r.phases : nullptr;
  if (out) out->reserve(policy_phases.size() + dense.size());
  // Overlapping streams, or an eager implementation's host dispatch stream, need the simulator; one
  // GPU stream alone is the exact sum of its rooflines.
  const bool simulate = !sim::is_single_stream(policy_phases) || d.machine.has_dispatch();
  if (serial || keep_phases || !simulate) {
    r.serial_seconds = sum_phases(d, policy_phases, "decode", out) + sum_phases(d, dense, "decode", out);
    r.seconds = r.serial_seconds;
  }
  if (simulate) {
    if (full_step_simulation()) {
      const sim::DecodeGraph g = sim::build_decode_graph(policy_phases, dense, d.model->layers, d.machine);
      r.seconds = g.graph.run(sim::capacities(d.machine), sim::couplings(d.machine)).makespan;
    } else {
      r.seconds =
          sim::simulate_decode_step(policy_phases, dense, d.model->layers, d.machine, sim::Detail::makespan).timing.makespan;
    }
    r.simulated = true;
  }
  return r;
}
}  // namespace

StepResult decode_step(const Deployment& d, const Policy& pol, const ParamValues& params, const StepShape& shape,
                       bool keep_phases, const std::vector<std::string>* without) {
  return decode_step_impl(d, pol, params, shape, keep_phases, without, true);
}

double decode_step_time(const Deployment& d, const Policy& pol, const ParamValues& params, const StepShape& shape) {
  return decode_step_impl(d, pol, params, shape, false, nullptr, false).seconds;
}

double decode_step_seconds(const Deployment& d, const Policy& pol, const ParamValues& params, double batch,
                           double context, std::vector<PhaseResult>* phases) {
  StepResult r = decode_step(d, pol, params, StepShape{batch, context, 0}, phases != nullptr);
  if (phases) *phases = std::move(r.phases);
  return r.seconds;
}

PlanResult evaluate(const DesignPoint& p) {
  PlanResult r;
  r.policy = p.policy;
  r.params = *p.params;
  r.context_tokens = p.context_tokens;
  r.output_tokens = p.output_tokens;
  r.memory = plan_memory(p, &r.reason);
  p.policy->notes(*p.deployment, *p.params, double(p.context_tokens), double(p.output_tokens), r.notes);
  if (const auto& ops = p.deployment->machine.host_ops)
    r.notes.push_back(host_ops_note(*ops, p.deployment->machine.host_cores, p.deployment->machine.dram));
  r.batch = p.batch > 0 ? p.batch : r.memory.max_batch;
  r.feasible = r.reason.empty();
  if (!r.feasible) return r;
  const Deployment& d = *p.deployment;
  const double B = double(r.batch);

  // TTFT: prefill of one prompt (dense transformer + the policy's state building); prefill_cost()
  // below is the same sum without the phase list.
  PhaseList pre;
  pre.reserve(8);
  add_prefill_phases(d, double(p.context_tokens), pre);
  p.policy->prefill(d, *p.params, double(p.context_tokens), pre);
  for (Phase& ph : pre) ph.context_tokens = double(p.context_tokens), ph.batch = 1;
  r.ttft_s = sum_phases(d, pre, "prefill", &r.prefill);

  // TPOT: the mean decode step. Step j = 1..output-1 attends to context + j tokens; the mean attended
  // context is context + output/2, where a step time affine in context equals the mean step time.
  r.decode_context = double(p.context_tokens) + double(p.output_tokens) / 2.0;
  StepResult step = decode_step(d, *p.policy, *p.params,
                                StepShape{B, double(p.context_tokens), double(p.output_tokens) / 2.0});
  r.tpot_s = step.seconds;
  r.decode_serial_s = step.serial_seconds;
  r.simulated = step.simulated;
  r.decode = std::move(step.phases);
  r.throughput_tok_s = B / r.tpot_s / d.tp;
  const TimeRange tr = time_range(r.decode, r.tpot_s, d.machine), pr = time_range(r.prefill, r.ttft_s, d.machine);
  r.tpot_lo_s = tr.lo, r.tpot_hi_s = tr.hi, r.ttft_lo_s = pr.lo, r.ttft_hi_s = pr.hi;
  r.tpot_evidence = tr.share;

  std::array<double, 7> by_bound{};
  for (const auto& ph : r.decode) by_bound[size_t(ph.bound)] += ph.seconds;
  size_t best = 0;
  for (size_t i = 1; i < by_bound.size(); ++i)
    if (by_bound[i] > by_bound[best]) best = i;
  r.dominant = Bound(best);
  return r;
}

PrefillCost prefill_cost(const Deployment& d, const Policy& pol, const ParamValues& params, double prompt) {
  PhaseList dense, own;
  add_prefill_phases(d, prompt, dense);
  pol.prefill(d, params, prompt, own);
  for (PhaseList* l : {&dense, &own})
    for (Phase& ph : *l) ph.context_tokens = prompt, ph.batch = 1;
  return {sum_phases(d, dense, "prefill", nullptr), sum_phases(d, own, "prefill", nullptr)};
}

void compare_to_full(std::vector<PlanResult>& results, const std::vector<PlanResult>& full) {
  for (PlanResult& r : results) {
    r.speedup_vs_full = r.tpot_speedup_vs_full = r.kv_hbm_vs_full = 0;
    if (!r.feasible) continue;
    for (const PlanResult& f : full) {
      if (f.context_tokens != r.context_tokens || !f.feasible) continue;
      r.speedup_vs_full = r.throughput_tok_s / f.throughput_tok_s;
      r.tpot_speedup_vs_full = f.tpot_s / r.tpot_s;
      const double kv = r.memory.kv_hbm_bytes / double(r.batch), fkv = f.memory.kv_hbm_bytes / double(f.batch);
      r.kv_hbm_vs_full = fkv > 0 ? kv / fkv : 0;
    }
  }
}

void compare_at_full_batch(std::vector<PlanResult>& results, const std::vector<PlanResult>& full,
                           const Deployment& d) {
  for (PlanResult& r : results) {
    r.has_at_full_batch = false;
    r.at_full_batch = {};
    if (!r.feasible) continue;
    for (const PlanResult& f : full) {
      if (f.context_tokens != r.context_tokens || !f.feasible) continue;
      PlanResult::AtBatch a;
      a.batch = f.batch;
      if (f.batch == r.batch) {
        a.feasible = true;
        a.tpot_s = r.tpot_s;
        a.throughput_tok_s = r.throughput_tok_s;
      } else {
        DesignPoint p{&d, r.policy, &r.params, r.context_tokens, r.output_tokens, f.batch};
        const PlanResult e = evaluate(p);
        a.feasible = e.feasible;
        a.reason = e.reason;
        a.tpot_s = e.tpot_s;
        a.throughput_tok_s = e.throughput_tok_s;
      }
      // Equal batch and tp: (B / T / tp) / (B / T_full / tp) = T_full / T.
      if (a.feasible) a.throughput_vs_full = f.tpot_s / a.tpot_s;
      r.at_full_batch = a;
      r.has_at_full_batch = true;
    }
  }
}

std::vector<std::string> PlanResult::extrapolated_phases() const {
  std::vector<std::string> names;
  for (const auto* list : {&prefill, &decode})
    for (const PhaseResult& p : *list)
      if (p.extrapolated && std::find(names.begin(), names.end(), p.phase.name) == names.end())
        names.emplace_back(p.phase.name);
  return names;
}

std::vector<UnmeasuredPhase> PlanResult::unmeasured_phases(const Calibration& cal) const {
  std::vector<UnmeasuredPhase> out;
  if (!cal.calibrated) return out;
  for (const auto* list : {&prefill, &decode})
    for (const PhaseResult& p : *list) {
      const Ceiling c = p.ceiling;
      if (c == Ceiling::count || p.curve || is_host_ceiling(c) || cal.constant_measured(p.phase.kind, c)) continue;
      if (p.kernel != KernelModelId::none) continue;  // a kernel model priced it (modeled_phases)
      if (std::any_of(out.begin(), out.end(), [&](const UnmeasuredPhase& u) { return u.name == p.phase.name; })) continue;
      out.push_back({p.phase.name, p.stage, p.phase.kind, c, cal[p.phase.kind][c],
                     cal.efficiency(p.phase.kind, c, p.phase.run_bytes), cal.constant_source(p.phase.kind, c)});
    }
  return out;
}

std::vector<ModeledPhase> PlanResult::modeled_phases() const {
  std::vector<ModeledPhase> out;
  for (const auto* list : {&prefill, &decode})
    for (const PhaseResult& p : *list) {
      if (p.kernel == KernelModelId::none) continue;
      if (std::any_of(out.begin(), out.end(), [&](const ModeledPhase& m) { return m.name == p.phase.name; })) continue;
      out.push_back({p.phase.name, p.stage, p.kernel, p.kernel_class_curve});
    }
  return out;
}

std::vector<PlanResult> plan_scenario(const Scenario& s, const Deployment& d, const Policy& full_kv) {
  const Workload& w = s.workload;
  std::vector<PlanResult> results, reference;
  const ParamValues no_params;
  for (int64_t ctx : w.context_tokens) {
    for (const PolicyChoice& c : s.policies) {
      DesignPoint dp{&d, c.policy, &c.params, ctx, w.output_tokens, w.batch};
      results.push_back(evaluate(dp));
    }
    // Full KV at the same context and batch setting: the reference for speedup and memory columns.
    DesignPoint ref{&d, &full_kv, &no_params, ctx, w.output_tokens, w.batch};
    reference.push_back(evaluate(ref));
  }
  compare_to_full(results, reference);
  compare_at_full_batch(results, reference, d);
  if (s.calibration.calibrated) {
    // The roofline bound (the library's roofline.yaml: every efficiency 1.0) at the estimate's batch.
    const Calibration roof =
        load_calibration_file(resolve(LibraryKind::calibration, "roofline", s.file, 0, "calibration"));
    Deployment bound_d = d;
    bound_d.machine.calibration = &roof;
    // The host's measured call, region and per-core DRAM costs come with the calibration too
    // (make_machine): the bound has none, as `--calibration roofline` has none, or it is no bound.
    bound_d.machine.host_threads = roof.host_threads;
    for (PlanResult& r : results) {
      if (!r.feasible) continue;
      DesignPoint b{&bound_d, r.policy, &r.params, r.context_tokens, r.output_tokens, r.batch};
      const PlanResult rb = evaluate(b);
      if (!rb.feasible) continue;
      r.has_bound = true;
      r.bound_tpot_s = rb.tpot_s;
      r.bound_ttft_s = rb.ttft_s;
      r.bound_throughput_tok_s = rb.throughput_tok_s;
    }
  }
  return results;
}

}  // namespace kvsim
