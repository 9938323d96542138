// The replay engine: every policy really selects on a trace, and its selection is measured against
// full attention (docs/replay.md).
//
//   load_trace_data   the trace in float, checked against a memory limit
//   ground truth      full attention of every decode row (position >= P), stored layer and query head,
//                     as batched GEMMs: per (layer, KV head) and block of rows, Q_block [g·rows, d] × Kᵀ,
//                     causal mask per row, softmax, × V — computed once and shared by every policy
//   run_replay        each policy's HeadSelection per (layer, KV head) and row → per query head the
//                     attention output over the selection (ref::gqa_gather_attention + ref::biased_attention,
//                     merged exactly with ref::merge_state) and the metrics below
//   apply_statistics  a selector's measured statistics replace the cost-model parameters of that name
//
// Metrics per (policy, decode row, layer, query head), with p the full-attention probabilities:
//   recall        Σ_{i ∈ tokens ∪ extra_tokens} p_i                   (1 for `all`)
//   output error  ||o_sel − o_full|| / ||o_full||                      (unavailable without values)
//   top-k recall  |top-k(p) ∩ (tokens ∪ extra_tokens)| / k, k = min(topk, p + 1)
//   tokens        |tokens| + number of extra entries                   (p + 1 for `all`)
//   focus recall  |focus ∩ (tokens ∪ extra_tokens)| / |focus ∩ [0, p]| (only with focus tokens: a needle)
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <Eigen/Core>

#include "kernels/backend/backend.hpp"
#include "replay/device_check.hpp"
#include "traces/select/selector.hpp"

namespace kvsim::replay {

// Bytes load_trace_data needs for `t` (keys, values when present, queries; float32).
double trace_data_bytes(const TraceSource& t);
// Loads the whole trace to float. `where` names the trace in errors (a file path). Throws InputError
// naming it, the bytes needed and the limit (and suggesting `kvsim trace slice`) when over memory_limit.
TraceData load_trace_data(const TraceSource& t, double memory_limit_bytes, const std::string& where = "trace");

// The full-attention ground truth of one (layer slot, KV-head slot) over decode rows [s0, s1):
// for each row r and each query head j of the group (t.group_of[h]), the probabilities over tokens
// 0..cols-1 (zero past the row's position) and the output.
struct GroundTruthBlock {
  int64_t s0 = 0, rows = 0, cols = 0;  // cols = position of the last row + 1
  int group = 0, d = 0;
  // Eigen-aligned storage: Eigen's vectorized softmax peels the unaligned head of each row with scalar
  // exp and sum, so with malloc's arbitrary alignment a row's rounding (and every recall and error
  // derived from it) depended on which worker thread's buffer held it. Aligned, a row's alignment is a
  // function of `cols` alone and replay is bit-identical at any thread count (test_reproducibility).
  using Floats = std::vector<float, Eigen::aligned_allocator<float>>;
  Floats probs;    // [group][rows][cols] (row-major; row (j, r) = probs + (j * rows + r) * cols)
  Floats outputs;  // [group][rows][d]; empty without values
  Floats lse;      // [group][rows]: log Σ exp(logit) over the row's tokens (natural log)
  double flops = 0;            // GEMM FLOPs executed (2·g·rows·cols·d per product)
  const float* p(int j, int64_t r) const { return probs.data() + (size_t(j) * rows + size_t(r)) * cols; }
  const float* o(int j, int64_t r) const { return outputs.data() + (size_t(j) * rows + size_t(r)) * d; }
  float lse_of(int j, int64_t r) const { return lse[size_t(j) * rows + size_t(r)]; }
};
// Scratch buffers are reused when the block is passed again.
void ground_truth_block(const TraceData& t, int l, int h, int64_t s0, int64_t s1, GroundTruthBlock& out);

// A 1024³ single-threaded Eigen SGEMM (best of `reps`): FLOP/s per CPU-second (thread CPU time) of this
// build on this core.
double measure_sgemm_peak(int n = 1024, int reps = 3);

struct ReplayOptions {
  int topk = 64;             // k of the top-k recall
  int64_t max_steps = 0;     // decode rows replayed (the first N); 0 = all
  int block_rows = 32;       // decode rows per ground-truth GEMM block
  int threads = 0;           // worker threads over (layer, KV head); 0 = hardware concurrency
  int step_ranges = 4;       // how many equal step ranges the per-range aggregates split the rows into
  bool measure_peak = true;  // time measure_sgemm_peak() at the start
  std::function<void(double)> progress;  // fraction done
  // Focus tokens (e.g. a needle's span), sorted: when given, each selection's focus recall — the share
  // of the focus tokens already in the cache that it attends — is measured too.
  std::vector<int32_t> focus_tokens;
  // A device backend (`--device cuda`): every policy's selection and attention also run on it (a fork of
  // it per policy), compared with the host replay in PolicyReplay::device. Null: the host replay alone.
  const kernels::Backend* device = nullptr;
  // The host kernels (`--kernels`): the selectors' kernels and the attention over each selection.
  // Null: the optimized host kernels (kernels/host/); kernels::host_backend() runs the reference ones.
  // Selections are identical either way (tests/test_replay_kernels.cpp); outputs agree to float rounding.
  const kernels::Backend* host = nullptr;
  // How the output over a selection's stored tokens is computed. false (the default): from the ground
  // truth's probabilities, which the replay has anyway — attention restricted to a set S is
  // softmax_S(x) = p(x) / Σ_S p, so out_S = Σ_S p(x)·v_x / Σ_S p and lse_S = lse + log Σ_S p: no key is
  // re-read and no exp recomputed, only the value rows (a set whose mass underflows, Σ_S p < 1e-30, runs
  // the kernel instead). true: the host backend's attention kernel over the gathered rows (what
  // `--kernels reference` does, and the check that both agree: tests/test_replay_kernels.cpp).
  bool attention_kernel = false;
};

// What one policy variant runs with.
struct PolicyRun {
  std::string policy;  // cost-model name (has_selector must be true)
  ParamValues params;  // in the order of the policy's params(); empty = defaults
  std::string label;   // for output; defaults to the policy name
};

struct Summary {
  double mean = 0, p10 = 0, p50 = 0, p90 = 0, min = 0, max = 0;
  int64_t n = 0;
};
struct Quality {
  Summary recall, topk_recall, tokens;
  std::optional<Summary> error;  // absent when the trace has no values
  std::optional<Summary> focus;  // focus recall; absent without ReplayOptions::focus_tokens
};

struct PolicyReplay {
  PolicyRun run;
  Quality overall;
  std::vector<Quality> per_layer;                     // [layer slot]
  std::vector<Quality> per_range;                     // [step range]
  std::vector<std::pair<int64_t, int64_t>> ranges;    // decode row ranges [a, b) (indices into decode rows)
  std::map<std::string, Statistic> statistics;        // the selector's, at the end
  double select_seconds = 0;                          // prefill + select, wall
  double prefill_seconds = 0;                         // the prefill part of select_seconds, wall
  double context_mean = 0;                            // mean p + 1 over the replayed rows
  std::optional<DeviceCheck> device;                  // with ReplayOptions::device only
};

struct ReplayResult {
  std::vector<PolicyReplay> policies;
  int64_t decode_rows = 0;          // rows replayed
  int threads = 1;
  bool has_values = false;
  double gt_flops = 0;              // ground-truth GEMM FLOPs executed
  double gt_thread_seconds = 0;     // CPU time the workers spent in the ground truth, summed over workers
  double sgemm_peak_flops = 0;      // single core (0 when not measured)
  double metric_thread_seconds = 0; // CPU time in the policies' attention and metrics, summed over workers
  double wall_seconds = 0;
  // Where the wall time went: the policies' prefills (concurrent), their selections (concurrent, per
  // block of rows), and the ground truth with the metrics (per (layer, KV head), parallel).
  double prefill_wall_seconds = 0, select_wall_seconds = 0, metrics_wall_seconds = 0;
  double gt_flops_per_core() const { return gt_thread_seconds > 0 ? gt_flops / gt_thread_seconds : 0; }
  double gt_fraction_of_peak() const { return sgemm_peak_flops > 0 ? gt_flops_per_core() / sgemm_peak_flops : 0; }
};

ReplayResult run_replay(const TraceData& t, const std::vector<PolicyRun>& runs, const ReplayOptions& o = {});

// Statistics → cost model. How a measured statistic carries over to the scenario's model and context.
using kvsim::CarryRule;  // declared per parameter in the policy's table (model/policy.hpp)
struct CarriedStatistic {
  std::string param;
  double analytical = 0;    // the parameter's value before
  double measured = 0;      // the statistic on the trace
  double applied = 0;       // what the parameter was set to
  CarryRule rule = CarryRule::as_is;
  int64_t samples = 0;
  std::string doc;
};
// Replaces each parameter of `policy` named like a statistic (value clamped to the parameter's range,
// rounded for integer parameters), scaling by context_ratio = scenario context / trace context where the
// parameter's carry rule says (ParamSpec::carry, declared in the policy's parameter table). Returns what was carried, in parameter order; statistics with no parameter are left out.
std::vector<CarriedStatistic> apply_statistics(const Policy& policy, ParamValues& params,
                                               const std::map<std::string, Statistic>& stats,
                                               double context_ratio = 1.0);

}  // namespace kvsim::replay
