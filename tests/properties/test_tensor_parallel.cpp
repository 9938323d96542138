// Tensor parallelism and the roofline bound, on generated scenarios.
//   - Per-GPU bytes under TP t: the weights split t ways but for the norms (replicated), and the K, V
//     projections when the model has fewer KV heads than GPUs (one KV head per GPU, as vLLM does); the KV
//     cache per token splits t ways, or holds one KV head per GPU (GQA expanded before caching: the
//     query heads, split t ways).
//   - `calibration: roofline` plans exactly the bound a calibrated plan prints beside every estimate.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "policies/registry.hpp"
#include "tests/properties/plan_helpers.hpp"

using namespace kvsim;
using namespace kvsim::props;

RC_GTEST_PROP(TensorParallel, PerGpuBytesSplit, ()) {
  Draw draw;
  draw.tp = false;
  ScenarioSpec one = *scenarios(draw);
  const auto l1 = loaded(one);
  const ModelConfig& m = l1->s.model;
  std::vector<int> tps;
  for (int t : {2, 4, 8})
    if (m.splits_over(t)) tps.push_back(t);
  RC_PRE(!tps.empty());
  ScenarioSpec many = one;
  many.tp = *rc::gen::elementOf(tps);
  const auto lt = loaded(many);
  const double t = many.tp, bw = l1->d.bw, h = m.hidden, hd = m.head_dim, L = m.layers;
  const double norms = (2.0 * h * L + h) * bw;
  // K and V projections held whole on each GPU beyond the t-way share, when t > kv_heads.
  const double kv_heads_per_gpu = std::max(1.0, m.kv_heads / t);
  const double kv_proj = L * 2 * h * hd * (m.kv_heads / t) * bw + (m.qkv_bias ? L * 2 * hd * (m.kv_heads / t) * bw : 0);
  const double kv_proj_held = L * 2 * h * hd * kv_heads_per_gpu * bw + (m.qkv_bias ? L * 2 * hd * kv_heads_per_gpu * bw : 0);
  const double expected = (l1->d.weight_bytes() - norms) / t + norms + (kv_proj_held - kv_proj);
  RC_ASSERT(near(lt->d.weight_bytes(), expected, 1e-12));
  // The cache holds the KV heads per GPU, or every query head's when the implementation expands GQA
  // before caching (model/implementation.hpp, kv_expand_gqa): those split t ways.
  const double cached_per_gpu = l1->d.hkv_cached == m.kv_heads ? kv_heads_per_gpu : m.query_heads / t;
  RC_ASSERT(near(lt->d.kv_bytes_per_token(), l1->d.kv_bytes_per_token() / l1->d.hkv_cached * cached_per_gpu, 1e-12));
  // The plan's memory reports the same weights, and each GPU's KV share per sequence.
  const PlanResult a = l1->evaluate_at(one.context, 1), b = lt->evaluate_at(one.context, 1);
  if (a.feasible && b.feasible) {
    RC_ASSERT(near(b.memory.weight_bytes, lt->d.weight_bytes()));
    RC_ASSERT(le(b.memory.weight_bytes, a.memory.weight_bytes));
  }
}

RC_GTEST_PROP(RooflineBound, CalibrationRooflineEqualsThePrintedBound, ()) {
  Draw draw;
  draw.max_batch = *rc::gen::element<int64_t>(0, 16);  // 0: batch max
  ScenarioSpec spec = *scenarios(draw);
  spec.calibration = "auto";
  const auto cal = loaded(spec);
  spec.calibration = "roofline";
  const auto bound = loaded(spec);
  const Policy& full = *policy_catalog().find("full");
  const auto a = plan_scenario(cal->s, cal->d, full), b = plan_scenario(bound->s, bound->d, full);
  RC_ASSERT(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    RC_ASSERT(a[i].feasible == b[i].feasible);
    if (!a[i].feasible) continue;
    RC_ASSERT(a[i].batch == b[i].batch);
    RC_ASSERT(a[i].has_bound);
    RC_ASSERT(!b[i].has_bound);  // the bound alone: nothing printed beside it
    RC_ASSERT(near(a[i].bound_tpot_s, b[i].tpot_s));
    RC_ASSERT(near(a[i].bound_ttft_s, b[i].ttft_s));
    RC_ASSERT(near(a[i].bound_throughput_tok_s, b[i].throughput_tok_s));
    // A bound: no calibrated estimate is faster. Exception (docs/robustness.md, "Properties"): the
    // bound holds per phase, not for a simulated step, whose phases share resources and can finish
    // earlier when one of them is slower (a scheduling anomaly): v100-32g, mistral-7b TP 2, CTKVR with
    // 256 centroids at batch 90 steps in 51.19349 ms calibrated, whose host calls cost 1.43 ms, and
    // 51.19399 ms on the roofline, where they cost nothing. Allowed: 0.1 % (seen: 0.001 %).
    RC_ASSERT(b[i].tpot_s <= a[i].tpot_s * (a[i].simulated ? 1.001 : 1 + 1e-9));
    RC_ASSERT(le(b[i].ttft_s, a[i].ttft_s));
  }
}
