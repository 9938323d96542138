// The replay's recall (replay/replay.hpp): the full-attention mass of the tokens a selection attends,
// tokens ∪ extra_tokens, each token once. On random synthetic traces:
//   - the test-only "overlap" policy (overlap_policy.hpp: a strided selection with sink and recent-window
//     extras over it) gets exactly the recall counted by hand from the trace's own softmax, and at most 1;
//   - every built-in policy with random in-range parameters gets recall and top-k recall in [0, 1].
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <cmath>
#include <set>

#include "policies/registry.hpp"
#include "replay/replay.hpp"
#include "tests/properties/scenario_gen.hpp"
#include "traces/synthetic/synthetic.hpp"

using namespace kvsim;
using namespace kvsim::props;
using namespace kvsim::replay;

namespace {
// A small synthetic trace: the tiny preset at a random length and seed.
SyntheticConfig small_trace() {
  const int64_t prompt = *rc::gen::inRange<int64_t>(64, 513);
  const int64_t generated = *rc::gen::inRange<int64_t>(2, 17);
  const int seed = *rc::gen::inRange(1, 1000);
  return load_synthetic_config("tiny", {{"prompt_tokens", std::to_string(prompt)},
                                        {"generated_tokens", std::to_string(generated)},
                                        {"seed", std::to_string(seed)},
                                        {"needles", "[]"}});
}

ReplayOptions quick(int64_t steps) {
  ReplayOptions o;
  o.measure_peak = false;
  o.threads = 1;
  o.max_steps = steps;
  return o;
}

// The recall of one head by hand: softmax of q.k / sqrt(d) over tokens 0..n-1, summed over `attended`.
double hand_recall(const TraceData& t, int l, int qh, int kvh, int64_t s, const std::set<int64_t>& attended) {
  const int64_t n = t.position(s) + 1;
  std::vector<double> logit(static_cast<size_t>(n));
  double top = -INFINITY;
  for (int64_t i = 0; i < n; ++i) {
    double dot = 0;
    for (int c = 0; c < t.d; ++c) dot += double(t.q(l, qh, s)[c]) * t.k(l, kvh)[i * t.d + c];
    logit[size_t(i)] = dot / std::sqrt(double(t.d));
    top = std::max(top, logit[size_t(i)]);
  }
  double all = 0, in = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double e = std::exp(logit[size_t(i)] - top);
    all += e;
    if (attended.count(i)) in += e;
  }
  return in / all;
}
}  // namespace

RC_GTEST_PROP(Recall, OverlappingExtrasCountOnceAndEqualTheHandCount, ()) {
  const SyntheticTrace trace(small_trace());
  const TraceData t = load_trace_data(trace, 1e9);
  const int64_t stride = *rc::gen::inRange<int64_t>(2, 17), sinks = *rc::gen::inRange<int64_t>(1, 9),
                window = *rc::gen::inRange<int64_t>(1, 33);
  const int64_t steps = 4;
  const ReplayResult r = run_replay(t, {{"overlap", {double(stride), double(sinks), double(window)}, "overlap"}}, quick(steps));
  const Summary& got = r.policies.front().overall.recall;
  // The same rows, layers and heads by hand: the first `steps` decode rows.
  double sum = 0, most = 0;
  int64_t count = 0;
  for (int64_t s = 0, used = 0; s < t.S && used < steps; ++s) {
    if (t.position(s) < t.P) continue;
    ++used;
    const int64_t n = t.position(s) + 1;
    std::set<int64_t> attended;
    for (int64_t i = 0; i < n; i += stride) attended.insert(i);
    for (int64_t i = 0; i < std::min(sinks, n); ++i) attended.insert(i);
    for (int64_t i = std::max(sinks, n - window); i < n; ++i) attended.insert(i);
    for (int l = 0; l < t.layers; ++l)
      for (int h = 0; h < t.kv_heads; ++h)
        for (int qh : t.group_of[size_t(h)]) {
          const double rec = hand_recall(t, l, qh, h, s, attended);
          sum += rec, most = std::max(most, rec), ++count;
        }
  }
  RC_ASSERT(got.n == count);
  RC_ASSERT(got.max <= 1.0);
  RC_ASSERT(std::abs(got.mean - sum / double(count)) <= 1e-5);
  RC_ASSERT(std::abs(got.max - most) <= 1e-5);
}

RC_GTEST_PROP(Recall, EveryPolicyStaysInZeroOne, ()) {
  const SyntheticTrace trace(small_trace());
  const TraceData t = load_trace_data(trace, 1e9);
  std::vector<PolicyRun> runs;
  for (const std::string& name : builtin_policy_names()) {
    if (!has_selector(name)) continue;
    const Policy* p = policy_catalog().find(name);
    ParamValues v = p->defaults();
    for (const auto& [k, text] : *policy_params(name)) {
      const ParamSpec& spec = p->params()[size_t(p->param_index(k))];
      v[size_t(p->param_index(k))] = spec.choices.empty() ? std::stod(text) : double(std::find(spec.choices.begin(), spec.choices.end(), text) - spec.choices.begin());
    }
    runs.push_back({name, v, name});
  }
  const ReplayResult r = run_replay(t, runs, quick(4));
  for (const PolicyReplay& p : r.policies) {
    RC_LOG() << p.run.policy << ": recall " << p.overall.recall.min << " .. " << p.overall.recall.max << "\n";
    RC_ASSERT(p.overall.recall.min >= 0.0);
    RC_ASSERT(p.overall.recall.max <= 1.0);
    RC_ASSERT(p.overall.topk_recall.min >= 0.0);
    RC_ASSERT(p.overall.topk_recall.max <= 1.0);
  }
}
