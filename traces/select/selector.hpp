// A policy's real selection on a trace: what `kvsim replay` runs for every policy. A TraceSelector
// builds the policy's prefill state from the trace (summaries, indexes, low-rank factors) and, at
// every recorded decode step, says what each (stored layer, stored KV head) attends: a set of the
// cache's tokens at full resolution, plus entries that are not stored tokens (SEKV's coarse span
// summaries with their log|S| bias, reconstructed tokens). Every query head of the KV head's GQA group
// attends the same set, as a sparse attention kernel (FlashInfer's page list, a gather) reads it and as
// the cost model charges it. The replay engine (replay.hpp) computes each head's attention output over
// that set with the reference kernels and compares it with full attention.
//
// The interface lives here, below the policies layer, so that every policy folder (policies/<name>/
// selector.cpp) can implement it and the replay engine above can drive any of them through the
// registry (policies/registry.hpp: make_selector).
//
// Parameters are the cost model's (policies/<name>/params.hpp: same names, defaults and ranges), so a scenario's
// `--set chess.rho_page=0.2` means the same thing in `plan` and `replay`. Statistics a selector
// measures (CTKVR's dedup ratio, SEKV's zoom rate, ...) are reported under those parameter names (taken
// from the parameter table's typed field: param_table().name(&Params::dedup)), and
// the planner reruns with them: that is how a trace drives the simulator.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "model/policy.hpp"
#include "traces/format/trace.hpp"

namespace kvsim::replay {

// The trace held in float for random access by selectors: keys/values of every stored layer and KV
// head for all T tokens, queries for all S rows. Built once per replay (replay.hpp checks it fits).
struct TraceData {
  const TraceSource* source = nullptr;
  int layers = 0, kv_heads = 0, q_heads = 0, d = 0, group = 0;  // stored counts; group = query heads per stored KV head
  int64_t T = 0, S = 0, P = 0;                                   // tokens, query rows, prompt tokens
  std::vector<float> keys, values;  // [layers][kv_heads][T][d]
  std::vector<float> queries;       // [layers][q_heads][S][d]
  std::vector<std::vector<int>> group_of;  // [kv slot] -> query-head slots of its group (stored ones)

  const float* k(int l, int h) const { return keys.data() + (size_t(l) * kv_heads + h) * size_t(T) * d; }
  const float* v(int l, int h) const { return values.data() + (size_t(l) * kv_heads + h) * size_t(T) * d; }
  const float* q(int l, int qh, int64_t s) const {
    return queries.data() + ((size_t(l) * q_heads + qh) * size_t(S) + size_t(s)) * d;
  }
  int64_t position(int64_t s) const { return source->tokens().query_positions[size_t(s)]; }
};

// What one (layer slot, KV-head slot) attends at one decode step.
struct HeadSelection {
  bool all = false;              // full attention over tokens 0..p (nothing else below is read)
  std::vector<int32_t> tokens;   // cache tokens attended at full resolution: sorted, unique, each <= p
  // Entries that are not stored tokens: key/value rows [m][d] and an additive logit bias each
  // (SEKV: a span's coarse mean with bias log|S|; a reconstructed token with bias 0).
  std::vector<float> extra_k, extra_v, extra_bias;
  // Tokens represented by extra entries at full resolution (SEKV's reconstructed tokens): counted as
  // attended by the recall metrics, though their K/V come from extra_k/extra_v.
  std::vector<int32_t> extra_tokens;
  // More extra entries, by reference instead of copied (SEKV's span means and reconstructed spans, which
  // it keeps for the whole replay): runs of `count` rows at k/v [count][d] with a bias per row (`bias`
  // null: 0). They come after the extra_k/extra_v rows in entry order and stay valid while the selector
  // lives. Copying them into every step's selection would move megabytes per (layer, head) and step.
  struct ExtraRun {
    const float *k = nullptr, *v = nullptr, *bias = nullptr;
    int64_t count = 0;
    // Low-rank form instead of k/v rows (SEKV's zoomed spans, eq. 6; k and v are null then): row i of
    // the keys is k_us[i, k_rank] · k_vt[k_rank, d], likewise the values, so attention can work in the
    // rank-r space instead of reading reconstructed d-wide rows.
    const float *k_us = nullptr, *k_vt = nullptr, *v_us = nullptr, *v_vt = nullptr;
    int k_rank = 0, v_rank = 0;
    bool factored() const { return k == nullptr; }
  };
  std::vector<ExtraRun> extra_runs;
  // All extra entries: the owned rows plus the runs.
  int64_t extra_count() const {
    int64_t n = int64_t(extra_bias.size());
    for (const ExtraRun& r : extra_runs) n += r.count;
    return n;
  }
  // Copies the runs into extra_k/extra_v/extra_bias (after the owned rows, in order) and drops them: the
  // contiguous form, for consumers that want one array (the CUDA check, the reference kernels, tests).
  // Factored runs are reconstructed in ref::lowrank_reconstruct's arithmetic (the same floats).
  void flatten_extras(int d) {
    auto expand = [d](std::vector<float>& to, const float* us, const float* vt, int r, int64_t n) {
      for (int64_t i = 0; i < n; ++i)
        for (int c = 0; c < d; ++c) {
          float s = 0.f;
          for (int j = 0; j < r; ++j) s += us[i * r + j] * vt[int64_t(j) * d + c];
          to.push_back(s);
        }
    };
    for (const ExtraRun& r : extra_runs) {
      if (r.factored()) {
        expand(extra_k, r.k_us, r.k_vt, r.k_rank, r.count);
        expand(extra_v, r.v_us, r.v_vt, r.v_rank, r.count);
      } else {
        extra_k.insert(extra_k.end(), r.k, r.k + r.count * d);
        extra_v.insert(extra_v.end(), r.v, r.v + r.count * d);
      }
      for (int64_t i = 0; i < r.count; ++i) extra_bias.push_back(r.bias ? r.bias[i] : 0.f);
    }
    extra_runs.clear();
  }
  void clear() {
    all = false;
    tokens.clear();
    extra_k.clear();
    extra_v.clear();
    extra_bias.clear();
    extra_tokens.clear();
    extra_runs.clear();
  }
};

// One measured statistic, named as a parameter of the cost-model policy when it replaces one.
struct Statistic {
  double value = 0;     // the mean over what was measured
  int64_t samples = 0;  // how many observations the mean is over
  std::string doc;      // what was measured, e.g. "unique recalled ids / (rho C')"
};

class TraceSelector {
 public:
  virtual ~TraceSelector() = default;
  // Builds the prefill state from the prompt tokens 0..P-1 (keys, values, the prompt's query rows).
  virtual void prefill(const TraceData& trace) = 0;
  // Selects for decode row `s` (query_positions[s] >= P). `out` has layers * kv_heads entries,
  // index l * kv_heads + h; each is cleared before the call. Rows come in increasing order.
  virtual void select(const TraceData& trace, int64_t s, std::vector<HeadSelection>& out) = 0;
  // Statistics measured so far, keyed by cost-model parameter name (e.g. "dedup", "zoom_rate",
  // "reselect_pages", "mean_sentence_tokens") or a descriptive name for ones the model does not use.
  virtual std::map<std::string, Statistic> statistics() const { return {}; }
};

}  // namespace kvsim::replay
