// The host dispatch stream of an eager implementation (issue 18, item 4): one host thread issues
// every operator in program order and a kernel cannot start before it is issued, so a small model's
// decode step is dispatch-bound while a long-context step of an 8B model stays HBM-bound.
#include <gtest/gtest.h>

#include <algorithm>

#include "core/error.hpp"
#include "core/yaml_reader.hpp"
#include "model/plan.hpp"
#include "model/scenario.hpp"
#include "policies/registry.hpp"

namespace kvsim {
namespace {

// Measured on this project's CI CPU by tools/measure/torch_dispatch.py (Hugging Face Llama, sdpa).
constexpr const char* kEager =
    "implementation: {dispatch: eager, ops_per_layer: 55, kernels_per_layer: 36, ops_per_step: 27, "
    "kernels_per_step: 17, dispatch_us: 4.0}\n";

struct Step {
  double tpot = 0, layer_dispatch = 0, step_dispatch = 0, layers = 0;
};

Step plan(const std::string& model, int64_t context, bool eager, int64_t batch = 1, double loop_us = 0) {
  std::string impl = eager ? kEager : "";
  if (loop_us > 0) impl.replace(impl.rfind('}'), 1, ", loop_us: " + std::to_string(loop_us) + "}");
  const std::string y = "hardware: h100-sxm\nhost: xeon-w9-3495x\nmodel: " + model +
                        "\ncalibration: roofline\nworkload: {context_tokens: " + std::to_string(context) +
                        ", output_tokens: 2, batch: " + std::to_string(batch) + ", cuda_graphs: false}\npolicies: [full]\n" +
                        impl;
  const Scenario s = load_scenario(load_yaml_string(y, "s.yaml"), "s.yaml", policy_catalog());
  const Deployment d = make_deployment(s);
  const ParamValues none;
  DesignPoint p{&d, s.policies[0].policy, &none, context, 2, batch};
  const PlanResult r = evaluate(p);
  EXPECT_TRUE(r.feasible) << r.reason;
  return {r.tpot_s, d.machine.dispatch_layer_s, d.machine.dispatch_step_s, double(s.model.layers)};
}

TEST(DispatchStream, TheProfileSetsTheHostTimePerLayerFromItsMeasurements) {
  const Step e = plan("smollm2-135m", 1024, true);
  // h100-sxm: host_launch_us 3.32 (issue 27: the published H100 cudaLaunchKernel measurement replaced
  // the 4.0 us estimate). Per layer: 55 operators x 4.0 us + 36 launches x 3.32 us.
  EXPECT_NEAR(e.layer_dispatch, 55 * 4.0e-6 + 36 * 3.32e-6, 1e-12);
  EXPECT_NEAR(e.step_dispatch, 27 * 4.0e-6 + 17 * 3.32e-6, 1e-12);
}

TEST(DispatchStream, ASmallModelIsDispatchBound) {
  const Step engine = plan("smollm2-135m", 1024, false), eager = plan("smollm2-135m", 1024, true);
  const double host = eager.layers * eager.layer_dispatch + eager.step_dispatch;
  // Issuing the operators takes far longer than running them: the step is the dispatch stream's
  // length, plus at most the last operators' GPU time after the host is done.
  EXPECT_GT(host, 5 * engine.tpot);
  EXPECT_GE(eager.tpot, host * (1 - 1e-9));
  EXPECT_LT(eager.tpot, host * 1.05);
}

TEST(DispatchStream, TheGenerationLoopsHostTimeDelaysADispatchBoundStepByItself) {
  // generate()'s own loop (loop_us) is host time on the dispatch stream once per step: a step that is
  // already dispatch-bound grows by exactly that time; the per-layer dispatch does not change.
  const Step base = plan("smollm2-135m", 1024, true), loop = plan("smollm2-135m", 1024, true, 1, 1500);
  EXPECT_NEAR(loop.step_dispatch - base.step_dispatch, 1500e-6, 1e-12);
  EXPECT_EQ(loop.layer_dispatch, base.layer_dispatch);
  EXPECT_NEAR(loop.tpot - base.tpot, 1500e-6, 1e-6);
}

TEST(DispatchStream, AStepWithoutSomePhasesKeepsTheHostDispatchStream) {
  // kvsim reproduce's "tpot without phases" (a figure that left out SentenceKV's copy and ranking):
  // the step is simulated without those phases' work, so a dispatch-bound step stays at least as long
  // as its host dispatch stream, not the serial sum of the remaining phases' GPU time.
  const std::string y = std::string("hardware: h100-sxm\nhost: xeon-w9-3495x\nmodel: smollm2-135m\ncalibration: roofline\n") +
                        "workload: {context_tokens: 4096, output_tokens: 2, batch: 1, cuda_graphs: false}\n"
                        "policies: [sentencekv]\n" + kEager;
  const Scenario s = load_scenario(load_yaml_string(y, "s.yaml"), "s.yaml", policy_catalog());
  const Deployment d = make_deployment(s);
  const Policy& pol = *s.policies[0].policy;
  const ParamValues& params = s.policies[0].params;
  const StepShape shape{1, 4096, 1};
  const std::vector<std::string> without = {"load_kv", "sentence_score", "sentence_select"};
  const StepResult all = decode_step(d, pol, params, shape), rest = decode_step(d, pol, params, shape, true, &without);
  const double host = s.model.layers * d.machine.dispatch_layer_s;  // the per-layer stream alone
  EXPECT_GE(rest.seconds, host * (1 - 1e-9));
  EXPECT_LE(rest.seconds, all.seconds * (1 + 1e-9));
  double left = 0;  // the named phases keep their place with no work
  for (const PhaseResult& r : rest.phases)
    if (std::find(without.begin(), without.end(), std::string(r.phase.name)) != without.end()) left += r.seconds;
  EXPECT_EQ(left, 0.0);
  EXPECT_LT(rest.serial_seconds, all.serial_seconds);
}

TEST(DispatchStream, ALongContextStepOfAn8BModelStaysHbmBound) {
  // At the largest batch that fits (3), each layer reads 3 x 512 MiB of KV and its weights: the host
  // issues a layer faster than the GPU runs it, so it runs ahead, and the step is the GPU's work plus
  // the first operators' dispatch — not their sum. (At batch 1 the two are close: Hugging Face's eager
  // loop costs ~12 ms of host time per step, as much as the GPU's 10.8 ms.)
  const Step engine = plan("llama-3.1-8b", 131072, false, 3), eager = plan("llama-3.1-8b", 131072, true, 3);
  const double host = eager.layers * eager.layer_dispatch + eager.step_dispatch;
  EXPECT_LT(host, 0.7 * engine.tpot);
  EXPECT_GE(eager.tpot, engine.tpot * 0.97);  // the GPU's kernel gap shrinks: launches moved to the host
  EXPECT_LT(eager.tpot, engine.tpot + 0.25 * host);
}

TEST(DispatchStream, CountsWithoutEagerDispatchAreAnError) {
  const std::string y =
      "hardware: h100-sxm\nmodel: llama-3.1-8b\nworkload: {context_tokens: 1024}\nimplementation: {ops_per_layer: 55}\n"
      "policies: [full]\n";
  try {
    load_scenario(load_yaml_string(y, "s.yaml"), "s.yaml", policy_catalog());
    FAIL() << "expected an input error";
  } catch (const InputError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("s.yaml"), std::string::npos) << m;
    EXPECT_NE(m.find("implementation.ops_per_layer"), std::string::npos) << m;
    EXPECT_NE(m.find("dispatch: eager"), std::string::npos) << m;
  }
}

}  // namespace
}  // namespace kvsim
