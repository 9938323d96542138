// The host dispatch stream of an eager implementation (issue 18, item 4): one host thread issues
// every operator in program order and a kernel cannot start before it is issued, so a small model's
// decode step is dispatch-bound while a long-context step of an 8B model stays HBM-bound.
#include <gtest/gtest.h>

#include <algorithm>
#include <utility>

#include "core/error.hpp"
#include "core/yaml_reader.hpp"
#include "model/decode_graph.hpp"
#include "model/plan.hpp"
#include "model/resources.hpp"
#include "model/scenario.hpp"
#include "model/transformer.hpp"
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

// A decode graph of L layers, each a zero-work qkv_proj and one attention phase that moves G seconds
// of HBM traffic (a share `lead` of it the concatenating KV append ahead of the attention kernel), on
// a machine whose host spends H seconds issuing each layer, `pre` of them before the layer's sync.
double graph_step(double H, double G, double lead, bool sync, double pre, int L = 8, double kernel_latency = 0) {
  static const Calibration roofline;  // every efficiency 1.0
  Machine m;
  m.hbm = 1e12;
  m.kernel_latency = kernel_latency;
  m.calibration = &roofline;
  m.dispatch_layer_s = H;
  m.sync_per_layer = sync;
  m.dispatch_layer_pre_sync_s = sync ? pre : 0;
  Phase qkv{"qkv_proj", PhaseKind::gemm, Device::gpu, ComputeUnit::tensor, {}};
  qkv.work.launches = L;
  qkv.repeat = L;
  Phase att{"attention", PhaseKind::attention, Device::gpu, ComputeUnit::tensor_act, {}};
  att.work.hbm_bytes = L * G * m.hbm;
  att.work.launches = 2 * L;
  att.repeat = L;
  att.lead_fraction = lead;
  const sim::DecodeGraph g = sim::build_decode_graph({att}, {qkv}, L, m);
  return g.graph.run(sim::capacities(m)).makespan;
}

TEST(DispatchSync, APerLayerSyncMakesTheStepHostTimePlusGpuTime) {
  // All of each layer's GPU work before its sync (the lead is the whole phase): the host issues the
  // layer, waits for the GPU to run it, then issues the next. Each layer costs H + G, whichever is larger.
  const double H = 300e-6, G = 200e-6;
  // Any number of layers: 2 and 3 too, where a per-layer phase repeats as often as a small count could
  // be mistaken for "once per step".
  for (int L : {2, 3, 8}) {
    EXPECT_NEAR(graph_step(H, G, 1.0, true, H, L), L * (H + G), 1e-12) << L;
    EXPECT_NEAR(graph_step(G, H, 1.0, true, G, L), L * (H + G), 1e-12) << L;
    // Without the sync the host runs ahead: the longer of the two streams, plus the other's first layer
    // (or last) at most.
    for (const auto& [h, gpu] : {std::pair{H, G}, std::pair{G, H}}) {
      const double overlapped = graph_step(h, gpu, 1.0, false, 0, L);
      EXPECT_LE(overlapped, L * std::max(h, gpu) + std::min(h, gpu) + 1e-12) << L;
      EXPECT_GE(overlapped, L * std::max(h, gpu) - 1e-12) << L;
    }
  }
  const int L = 8;
  // The lead cut alone changes nothing: without a sync the two pieces are the one phase.
  EXPECT_NEAR(graph_step(H, G, 0.5, false, 0, L), graph_step(H, G, 0.0, false, 0, L), 1e-12);
}

TEST(DecodeGraphShape, WhetherAPhaseRepeatsPerLayerIsPartOfTheLayoutsShape) {
  // A step laid out again by refilling its nodes (build_decode_graph into a graph of the same Shape)
  // must not reuse a layout where a phase ran once per step for one where it runs in every layer.
  static const Calibration roofline;
  Machine m;
  m.hbm = 1e12;
  m.calibration = &roofline;
  Phase qkv{"qkv_proj", PhaseKind::gemm, Device::gpu, ComputeUnit::tensor, {}};
  qkv.repeat = 4;
  Phase sel{"select", PhaseKind::select, Device::gpu, ComputeUnit::simt, {}};
  sel.work.hbm_bytes = 1e6;
  sel.repeat = 4;
  const sim::DecodeGraph per_layer = sim::build_decode_graph({sel}, {qkv}, 4, m);
  sel.repeat = 1;
  const sim::DecodeGraph per_step = sim::build_decode_graph({sel}, {qkv}, 4, m);
  EXPECT_FALSE(per_layer.shape == per_step.shape);
  ASSERT_EQ(per_layer.shape.phases.size(), 2u);
  EXPECT_TRUE(per_layer.shape.phases[0].per_layer);
  EXPECT_FALSE(per_step.shape.phases[0].per_layer);
}

TEST(DispatchSync, ThePiecesOfACutPhaseTogetherPayItsKernelLatencies) {
  // The attention phase cut at the layer's sync (lead 0.5): its kernels' latencies and its bytes are
  // shared out over the lead (the append) and the rest so that the pieces of each layer add up to the
  // uncut phase exactly: every latency paid once, none negative.
  static const Calibration roofline;
  Machine m;
  m.hbm = 1e12;
  m.calibration = &roofline;
  m.kernel_latency = 7e-6;
  m.dispatch_layer_s = 300e-6;
  m.sync_per_layer = true;
  m.dispatch_layer_pre_sync_s = 100e-6;
  const int L = 8;
  Phase qkv{"qkv_proj", PhaseKind::gemm, Device::gpu, ComputeUnit::tensor, {}};
  qkv.work.launches = L;
  qkv.repeat = L;
  Phase att{"attention", PhaseKind::attention, Device::gpu, ComputeUnit::tensor_act, {}};
  att.work.hbm_bytes = L * 1e8;
  att.work.launches = 3 * L;
  att.repeat = L;
  att.lead_fraction = 0.25;
  const sim::DecodeGraph g = sim::build_decode_graph({att}, {qkv}, L, m);
  std::vector<double> latency(L, 0.0), bytes(L, 0.0);
  std::vector<int> pieces(L, 0);
  for (size_t n = 0; n < g.graph.size(); ++n) {
    if (g.source[n] != 0) continue;  // attention is the policy list's phase 0
    const sim::SimPhase& ph = g.graph.phase(n);
    EXPECT_GE(ph.latency, 0.0) << ph.name;
    latency[size_t(g.layer[n])] += ph.latency;
    for (double a : ph.amount) bytes[size_t(g.layer[n])] += a;
    ++pieces[size_t(g.layer[n])];
  }
  for (int l = 0; l < L; ++l) {
    EXPECT_EQ(pieces[size_t(l)], 2) << l;
    EXPECT_NEAR(latency[size_t(l)], 3 * m.kernel_latency, 1e-15) << l;
  }
}

TEST(DispatchSync, TheHostWaitsOnlyForTheKernelsIssuedBeforeTheSync) {
  // Half the GPU work is the append before the sync, half the attention kernel after it; half the host
  // time before, half after. The attention kernel overlaps the host's next issuing: per layer
  // H/2 (issue up to the sync) + G/2 (the append) + H/2 (issue the rest while the kernel runs).
  const double H = 400e-6, G = 200e-6;
  const int L = 8;
  const double t = graph_step(H, G, 0.5, true, H / 2, L);
  EXPECT_NEAR(t, L * (H + G / 2) + 0.0, G / 2 + 1e-12);  // the last layer's attention may end after the host
  EXPECT_LT(t, L * (H + G));
  EXPECT_GT(t, graph_step(H, G, 0.5, false, 0, L));
}

// A Llama-3.1-8B scenario on an H100 NVL with the Hugging Face profile of SentenceKV's scenarios (the
// merged measurement: transformers 4.44.2 flash_attention_2; loop_us left out, the tests add what they test).
Scenario hf_scenario(const std::string& extra, int64_t context) {
  const std::string y =
      "hardware: h100-nvl\nmodel: llama-3.1-8b\ncalibration: roofline\nworkload: {context_tokens: " +
      std::to_string(context) +
      ", output_tokens: 1, batch: 1, cuda_graphs: false, allow_long_context: true}\npolicies: [full]\n"
      "implementation: {kv_append: concat, dispatch: eager, ops_per_layer: 60, kernels_per_layer: 39, "
      "ops_per_step: 36, kernels_per_step: 16, dispatch_us: 2.97" + extra + "}\n";
  return load_scenario(load_yaml_string(y, "hf.yaml"), "hf.yaml", policy_catalog());
}

double hf_tpot(const Scenario& s) {
  const Deployment d = make_deployment(s);
  const ParamValues none;
  DesignPoint p{&d, s.policies[0].policy, &none, s.workload.context_tokens[0], 1, 1};
  const PlanResult r = evaluate(p);
  EXPECT_TRUE(r.feasible) << r.reason;
  return r.tpot_s;
}

TEST(DispatchSync, TheConcatAppendIsTheAttentionPhasesLeadByItsBytes) {
  // torch.cat of the cache reads the old n tokens and writes them again: 2 n rows of the phase's bytes.
  const Scenario s = hf_scenario("", 32768);
  const Deployment d = make_deployment(s);
  PhaseList out;
  add_dense_attention(d, 1, 32768, out);
  ASSERT_EQ(out.size(), 1u);
  const double row = 2.0 * 8 * 128 * 2;  // one token's K and V in one layer
  EXPECT_NEAR(out[0].lead_fraction * out[0].work.hbm_bytes, 32.0 * 2 * 32768 * row, 1.0);
  EXPECT_NEAR(out[0].work.hbm_bytes * (1 - out[0].lead_fraction),
              32.0 * (32768 * row + row + 2 * 32 * 128 * 2), 1.0);  // one pass, the new token, q and o
  // An in-place append has no lead.
  const Scenario in_place = load_scenario(
      load_yaml_string("hardware: h100-nvl\nmodel: llama-3.1-8b\nworkload: {context_tokens: 32768}\npolicies: [full]\n", "e.yaml"),
      "e.yaml", policy_catalog());
  const Deployment e = make_deployment(in_place);
  PhaseList plain;
  add_dense_attention(e, 1, 32768, plain);
  EXPECT_EQ(plain[0].lead_fraction, 0.0);
}

TEST(DispatchSync, ASyncPerLayerExposesTheCacheCopyOfEveryLayer) {
  // At 32K the eager step is host-bound without the sync; with it, each layer's host time and its
  // torch.cat of the cache (2 x 256 MiB at 3.9 TB/s: 0.138 ms) add up.
  const double ctx = 32768;
  const double without = hf_tpot(hf_scenario("", int64_t(ctx)));
  const double with = hf_tpot(hf_scenario(", sync_per_layer: true, ops_before_sync: 42, kernels_before_sync: 24", int64_t(ctx)));
  const double cat = 2 * ctx * 2.0 * 8 * 128 * 2 / 3.9e12;
  EXPECT_GT(with - without, 0.8 * 32 * cat) << with << " " << without;
  EXPECT_LT(with - without, 32 * (cat + 2 * ctx * 4096 / 3.9e12) + 1e-3);  // at most the cat and the attention pass, plus slack
}

TEST(DispatchSync, TheStepsOperatorsBeforeTheLayersAreNotHiddenByAGpuBoundStep) {
  // At 256K the step is HBM-bound: the forward pass's once-per-step operators at the end were hidden
  // behind the GPU; issued before the first layer (after generate()'s sync), they delay the whole step.
  const Scenario base = hf_scenario("", 262144), front = hf_scenario(", ops_before_layers: 36, kernels_before_layers: 16", 262144);
  const Deployment d = make_deployment(front);
  EXPECT_NEAR(d.machine.dispatch_step_pre_s, d.machine.dispatch_step_s, 1e-15);
  EXPECT_NEAR(hf_tpot(front) - hf_tpot(base), d.machine.dispatch_step_s, 0.02 * d.machine.dispatch_step_s);
}

TEST(DispatchSync, ProfilesWithoutTheSyncFieldsKeepTheirStep) {
  // No sync fields: no pre-sync or pre-layer host time, and the concat lead does not change the step.
  const Scenario s = hf_scenario("", 65536);
  const Deployment d = make_deployment(s);
  EXPECT_FALSE(d.machine.sync_per_layer);
  EXPECT_EQ(d.machine.dispatch_layer_pre_sync_s, 0.0);
  EXPECT_EQ(d.machine.dispatch_step_pre_s, 0.0);
  PhaseList pol, dense;
  add_dense_attention(d, 1, 65536, pol);
  add_decode_dense_phases(d, 1, dense);
  const double cut = sim::build_decode_graph(pol, dense, 32, d.machine).graph.run(sim::capacities(d.machine)).makespan;
  pol[0].lead_fraction = 0;
  const sim::DecodeGraph whole = sim::build_decode_graph(pol, dense, 32, d.machine);
  EXPECT_EQ(cut, whole.graph.run(sim::capacities(d.machine)).makespan);
}

TEST(DispatchSync, SyncFieldsNameWhatTheyNeed) {
  auto error_of = [](const std::string& impl) {
    const std::string y = "hardware: h100-sxm\nmodel: llama-3.1-8b\nworkload: {context_tokens: 1024}\npolicies: [full]\n"
                          "implementation: {" + impl + "}\n";
    try {
      load_scenario(load_yaml_string(y, "s.yaml"), "s.yaml", policy_catalog());
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string eager = "dispatch: eager, ops_per_layer: 60, kernels_per_layer: 39, dispatch_us: 2.97, ";
  std::string m = error_of("sync_per_layer: true");
  EXPECT_NE(m.find("implementation.sync_per_layer"), std::string::npos) << m;
  EXPECT_NE(m.find("dispatch: eager"), std::string::npos) << m;
  m = error_of(eager + "ops_before_sync: 42");
  EXPECT_NE(m.find("implementation.ops_before_sync"), std::string::npos) << m;
  EXPECT_NE(m.find("sync_per_layer: true"), std::string::npos) << m;
  m = error_of(eager + "sync_per_layer: true");  // where the sync falls is required
  EXPECT_NE(m.find("implementation.ops_before_sync"), std::string::npos) << m;
  m = error_of(eager + "sync_per_layer: true, ops_before_sync: 61, kernels_before_sync: 2");
  EXPECT_NE(m.find("implementation.ops_before_sync"), std::string::npos) << m;
  EXPECT_NE(m.find("61"), std::string::npos) << m;
  EXPECT_NE(m.find("60"), std::string::npos) << m;  // the allowed range ends at ops_per_layer
  m = error_of(eager + "ops_per_step: 36, kernels_per_step: 16, ops_before_layers: 37");
  EXPECT_NE(m.find("implementation.ops_before_layers"), std::string::npos) << m;
  EXPECT_NE(m.find("36"), std::string::npos) << m;
}

}  // namespace
}  // namespace kvsim
