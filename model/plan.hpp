// Evaluating one design point: a deployment, a policy with its parameters, a context length, an
// output length and a batch (or "the largest that fits"). Memory decides feasibility and the max
// batch; the roofline of each phase gives TTFT and TPOT. Definitions: docs/metrics.md.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "model/policy.hpp"

namespace kvsim {

struct DesignPoint {
  const Deployment* deployment = nullptr;
  const Policy* policy = nullptr;
  const ParamValues* params = nullptr;
  int64_t context_tokens = 0;
  int64_t output_tokens = 0;
  int64_t batch = 0;  // 0 = the largest batch that fits
};

struct PhaseResult {
  Phase phase;
  std::string_view stage;  // "prefill" or "decode"
  double seconds = 0;
  Bound bound = Bound::latency;
  bool extrapolated = false;  // its efficiency was read outside a calibration curve's measured range
  // The ceiling of its largest work term (Ceiling::count: none) and whether that ceiling's efficiency
  // came from a curve (PhaseTime).
  Ceiling ceiling = Ceiling::count;
  bool curve = false;
  // The kernel model that priced it (none: a curve, a measured constant, the host, or the bare
  // roofline) and whether the model's class curve was measured (PhaseTime).
  KernelModelId kernel = KernelModelId::none;
  bool kernel_class_curve = false;
};

// A phase priced by a kernel model (model/kernel_model.hpp) rather than by a curve of its own.
struct ModeledPhase {
  std::string_view name, stage;
  KernelModelId model = KernelModelId::none;
  bool class_curve = false;  // the model's class efficiency came from a measured curve
};

// A GPU-side phase whose binding ceiling ran at a constant fallback efficiency: no curve (published
// fit for its GPU or architecture, or measured by kvsim validate) and no measured constant covers it.
struct UnmeasuredPhase {
  std::string_view name, stage;
  PhaseKind kind = PhaseKind::gemm;
  Ceiling ceiling = Ceiling::hbm;
  double constant = 1;    // the kind's constant on that ceiling
  double efficiency = 1;  // what the phase ran at: the constant times any gather run-length estimate
  std::string from;       // where the constant came from (Calibration::constant_source)
};

struct MemoryReport {
  double hbm_bytes = 0, dram_bytes = 0;          // used at peak, per GPU / per host share
  double kv_hbm_bytes = 0, kv_dram_bytes = 0;
  // The policy's index or summaries in HBM (MemoryDemand::index_hbm_per_seq; part of hbm_bytes): at
  // the batch, all layers; and one sequence's in one layer (the figure CTKVR's footnote 5 gives).
  double index_hbm_bytes = 0, index_hbm_bytes_per_seq_layer = 0;
  double weight_bytes = 0, workspace_bytes = 0;
  double hbm_usable = 0, dram_usable = 0;
  int64_t max_batch = 0;
};

struct PlanResult {
  const Policy* policy = nullptr;
  ParamValues params;
  int64_t context_tokens = 0, output_tokens = 0, batch = 0;
  bool feasible = false;
  std::string reason;             // why not, when infeasible
  std::vector<std::string> notes;  // the policy's remarks on this design point (Policy::notes), feasible or not
  double tpot_s = 0, ttft_s = 0;  // meaningful only when feasible
  double throughput_tok_s = 0;    // per GPU
  // The 80% ranges of TPOT and TTFT from the validation errors of the evidence behind each phase
  // (model/uncertainty.hpp); throughput's is theirs inverted (throughput_range).
  double tpot_lo_s = 0, tpot_hi_s = 0, ttft_lo_s = 0, ttft_hi_s = 0;
  // The decode phases' time by the evidence that priced them (Evidence order: curve, kernel model, host
  // law, none), as fractions of their serial sum.
  std::array<double, 4> tpot_evidence{};
  double throughput_lo_tok_s() const { return tpot_hi_s > 0 ? throughput_tok_s * tpot_s / tpot_hi_s : 0; }
  double throughput_hi_tok_s() const { return tpot_lo_s > 0 ? throughput_tok_s * tpot_s / tpot_lo_s : 0; }
  double decode_context = 0;      // the mean attended context the step was evaluated at
  double decode_serial_s = 0;     // the decode phases' rooflines summed (no overlap); >= tpot_s
  bool simulated = false;         // true when TPOT came from the discrete-event simulation
  Bound dominant = Bound::latency;
  MemoryReport memory;
  std::vector<PhaseResult> prefill, decode;
  // Against full KV at the same context and batch setting (set by compare_to_full; 0 = no feasible
  // reference): throughput ratio, TPOT ratio (full / this), HBM KV per sequence ratio (this / full).
  double speedup_vs_full = 0, tpot_speedup_vs_full = 0, kv_hbm_vs_full = 0;
  // The same policy at full KV's batch (same context): the seeds compare at equal batch. Set by
  // compare_at_full_batch when this result and full KV's are feasible; `feasible` false (with the
  // reason) when that batch does not fit this policy. throughput_vs_full = full's TPOT / tpot_s here.
  struct AtBatch {
    int64_t batch = 0;
    bool feasible = false;
    std::string reason;
    double tpot_s = 0, throughput_tok_s = 0, throughput_vs_full = 0;
  };
  bool has_at_full_batch = false;
  AtBatch at_full_batch;
  // The roofline bound at the same batch (every efficiency 1.0), next to the calibrated estimate above;
  // set by plan_scenario when the calibration in force is not the roofline itself.
  bool has_bound = false;
  double bound_tpot_s = 0, bound_ttft_s = 0, bound_throughput_tok_s = 0;
  // Names of the phases whose efficiency was extrapolated beyond a curve's measured range.
  std::vector<std::string> extrapolated_phases() const;
  // The GPU-side phases (binding ceiling not a host one) that ran at a fallback constant under `cal`,
  // the calibration the plan was made with: none when `cal` is uncalibrated (the whole plan is then
  // the roofline bound, and says so). Each name once, prefill before decode.
  std::vector<UnmeasuredPhase> unmeasured_phases(const Calibration& cal) const;
  // The phases a kernel model priced, each name once, prefill before decode.
  std::vector<ModeledPhase> modeled_phases() const;
};

// Memory only: the per-tier footprint at `batch` (0 = max) and the max batch.
MemoryReport plan_memory(const DesignPoint& p, std::string* reason_if_none_fits);

PlanResult evaluate(const DesignPoint& p);

// Fills the *_vs_full fields of each result from the full-KV result of the same context in `full`.
void compare_to_full(std::vector<PlanResult>& results, const std::vector<PlanResult>& full);

// Fills at_full_batch of each feasible result: the result's design point (policy, parameters, context,
// output) evaluated at the batch of the feasible full-KV result of the same context in `full`, on `d`.
void compare_at_full_batch(std::vector<PlanResult>& results, const std::vector<PlanResult>& full,
                           const Deployment& d);

struct Scenario;
// What `kvsim plan` answers: every (context, policy) of the scenario on deployment `d`, contexts outer,
// each compared with `full_kv` at the same context and batch setting (compare_to_full) and at full
// KV's batch (compare_at_full_batch).
std::vector<PlanResult> plan_scenario(const Scenario& s, const Deployment& d, const Policy& full_kv);

// One decode step: its time (seconds; simulated when the policy's phases use more than the GPU's main
// stream, otherwise the exact sum of rooflines), the phases with their solo roofline times, and the
// serial sum.
struct StepResult {
  double seconds = 0, serial_seconds = 0;
  bool simulated = false;
  std::vector<PhaseResult> phases;
};
// `without`: policy phases (by name) left out of the step — the step as a measurement that omitted
// them saw it (kvsim reproduce, metric tpot with phases). They keep their place in the graph with no
// work, so the phases that wait for them still run in order.
StepResult decode_step(const Deployment& d, const Policy& pol, const ParamValues& params, const StepShape& shape,
                       bool keep_phases = true, const std::vector<std::string>* without = nullptr);
// decode_step(...).seconds alone, the same number: a simulated step skips the serial sum (serve's step
// tables call it tens of thousands of times).
double decode_step_time(const Deployment& d, const Policy& pol, const ParamValues& params, const StepShape& shape);

// How decode_step times a step that needs the simulator: by default through the periodic shortcut
// (sim::StepGraph::run_periodic: one period simulated, the other layers copied from it, exact to the
// rounding of sums), or, with this on, every layer through the full event loop, the oracle the shortcut
// is tested against. KVSIM_FULL_STEP_SIM=1 in the environment turns it on for a whole run.
void set_full_step_simulation(bool on);
bool full_step_simulation();

// The decode and dense phases of a step, in the order the simulator lays them out (policy first).
void decode_phase_lists(const Deployment& d, const Policy& pol, const ParamValues& params, const StepShape& shape,
                        PhaseList& policy_phases, PhaseList& dense_phases);

// Prefill of one prompt of `prompt` tokens at batch 1 (what TTFT is made of in evaluate()): the dense
// transformer's phases and, separately, the policy's own (summaries, index build, offload).
struct PrefillCost {
  double dense_s = 0, policy_s = 0;
  double seconds() const { return dense_s + policy_s; }
};
PrefillCost prefill_cost(const Deployment& d, const Policy& pol, const ParamValues& params, double prompt);

// Decode step time (seconds) with a cache of `context` prompt tokens, for tests and sweeps.
double decode_step_seconds(const Deployment& d, const Policy& pol, const ParamValues& params,
                           double batch, double context, std::vector<PhaseResult>* phases = nullptr);

}  // namespace kvsim
