// Weights in one dtype, activations in another (fp32 or fp8 weights beside 16-bit activations): the
// weight GEMMs run at the weight dtype's tensor peak and move its bytes; attention and every policy
// phase run at the activation dtype's and do not change with the weights. The simulator converts a
// phase's FLOPs at the activation rate into time on the shared tensor cores (model/resources.cpp), and a
// conversion the wrong way round is only visible when the two dtypes differ: every phase alone in the
// simulator must take its roofline, and a hand-checked GEMM and attention phase their hand-computed time.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "model/resources.hpp"
#include "model/transformer.hpp"
#include "tests/properties/plan_helpers.hpp"

using namespace kvsim;
using namespace kvsim::props;

namespace {
double alone_in_simulator(const Phase& p, const Machine& m) {
  sim::StepGraph g(size_t(sim::Resource::count));
  g.add_phase(sim::to_sim_phase(p, m));
  return g.run(sim::capacities(m), sim::couplings(m)).makespan;
}

PhaseList all_phases(const Loaded& l, const ScenarioSpec& spec) {
  PhaseList pp, dense, pre;
  decode_phase_lists(l.d, l.policy(), l.params(), {double(spec.batch), double(spec.context), 0}, pp, dense);
  add_prefill_phases(l.d, double(spec.context), pre);
  l.policy().prefill(l.d, l.params(), double(spec.context), pre);
  for (Phase& p : pre) p.context_tokens = double(spec.context), p.batch = 1;
  pp.insert(pp.end(), dense.begin(), dense.end());
  pp.insert(pp.end(), pre.begin(), pre.end());
  return pp;
}

// The phases that read weights: the transformer's GEMMs and any a policy builds with weight_gemm (SEKV's
// surprisal_lm_head over the prompt), all on the weight dtype's tensor peak (model/transformer.cpp).
bool is_weight_gemm(const Phase& p) { return p.kind == PhaseKind::gemm && p.unit == ComputeUnit::tensor; }

// A scenario whose weight dtype differs from its activations' (fp32, or fp8 where the GPU has it).
rc::Gen<ScenarioSpec> mixed() {
  return rc::gen::suchThat(scenarios(), [](const ScenarioSpec& s) {
    return s.weight_dtype == "fp32" || s.weight_dtype == "fp8";
  });
}
}  // namespace

RC_GTEST_PROP(MixedDtypes, EveryPhaseAloneInTheSimulatorTakesItsRoofline, ()) {
  const ScenarioSpec spec = *mixed();
  const auto l = loaded(spec);
  for (const Phase& p : all_phases(*l, spec)) {
    const double roof = roofline(p, l->d.machine).seconds, sim = alone_in_simulator(p, l->d.machine);
    RC_LOG() << p.name << ": roofline " << roof << " s, simulator " << sim << " s\n";
    RC_ASSERT(near(roof, sim, 1e-9));
  }
}

RC_GTEST_PROP(MixedDtypes, OnlyTheWeightGemmsFollowTheWeightDtype, ()) {
  const ScenarioSpec spec = *mixed();
  ScenarioSpec native = spec;
  const auto lm = loaded(spec);
  RC_PRE(lm->d.act_dtype == DType::bf16 || lm->d.act_dtype == DType::fp16);
  // Weights in the activations' dtype, or fp16 where the GPU has no tensor cores for it (bf16 on Volta).
  native.weight_dtype = lm->s.gpu.tensor_peak(lm->d.act_dtype) > 0 ? std::string(to_string(lm->d.act_dtype)) : "fp16";
  const auto ln = loaded(native);
  const PhaseList a = all_phases(*lm, spec), b = all_phases(*ln, native);
  RC_ASSERT(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    RC_ASSERT(a[i].name == b[i].name);
    RC_ASSERT(a[i].work.flops == b[i].work.flops);
    if (is_weight_gemm(a[i])) {
      // The same FLOPs at the weight dtype's peak; the weights' bytes scale with its width.
      RC_ASSERT((a[i].work.hbm_bytes > b[i].work.hbm_bytes) == (lm->d.bw > ln->d.bw));
      continue;
    }
    RC_LOG() << a[i].name << ": " << roofline(a[i], lm->d.machine).seconds << " s with " << spec.weight_dtype
             << " weights, " << roofline(b[i], ln->d.machine).seconds << " s with " << native.weight_dtype << "\n";
    RC_ASSERT(a[i].work.hbm_bytes == b[i].work.hbm_bytes);
    RC_ASSERT(near(roofline(a[i], lm->d.machine).seconds, roofline(b[i], ln->d.machine).seconds, 1e-12));
    RC_ASSERT(near(alone_in_simulator(a[i], lm->d.machine), alone_in_simulator(b[i], ln->d.machine), 1e-9));
  }
}

// By hand: Llama 3.1 8B on an H100 SXM with fp32 weights, bf16 activations, the roofline calibration
// (every efficiency 1), batch 8. Datasheet figures (scenarios/hardware/h100-sxm.yaml): fp32 66.9 TFLOP/s
// (the weight GEMMs' peak), bf16 tensor 989.4 TFLOP/s (attention's).
TEST(MixedDtypes, HandCheckedPhaseTimesWithFp32Weights) {
  ScenarioSpec spec{.gpu = "h100-sxm", .host = "sapphire-rapids-2s", .model = "llama-3.1-8b",
                    .calibration = "roofline", .weight_dtype = "fp32", .kv_dtype = "bf16", .context = 4096, .batch = 8};
  const auto l = loaded(spec);
  const Machine& m = l->d.machine;
  ASSERT_EQ(l->d.act_dtype, DType::bf16);
  EXPECT_DOUBLE_EQ(m.tensor, 66.9e12);
  EXPECT_DOUBLE_EQ(m.tensor_act, 989.4e12);
  // qkv_proj over 32 layers: [8 x 4096] x [4096 x (32 + 2·8)·128], 4-byte weights, 2-byte activations.
  const double L = 32, B = 8, h = 4096, n = (32 + 2 * 8) * 128;
  const double flops = L * 2 * B * h * n, bytes = L * (h * n * 4 + B * (h + n) * 2);
  PhaseList pp, dense;
  decode_phase_lists(l->d, l->policy(), l->params(), {B, 4096, 0}, pp, dense);
  const Phase& qkv = dense.front();
  ASSERT_EQ(qkv.name, "qkv_proj");
  EXPECT_DOUBLE_EQ(qkv.work.flops, flops);
  EXPECT_DOUBLE_EQ(qkv.work.hbm_bytes, bytes);
  const double qkv_s = std::max(flops / 66.9e12, bytes / m.hbm) + L * m.kernel_latency;
  EXPECT_NEAR(roofline(qkv, m).seconds, qkv_s, 1e-12 * qkv_s);
  EXPECT_NEAR(alone_in_simulator(qkv, m), qkv_s, 1e-9 * qkv_s);
  // A compute-bound phase at the activation rate (attention's q.k and p.v on the tensor cores): 1 PFLOP
  // takes 1e15 / 989.4e12 s, in the roofline and alone in the simulator, whatever the weights' dtype.
  Phase att{"attention", PhaseKind::attention, Device::gpu, ComputeUnit::tensor_act, {}};
  att.work.flops = 1e15;
  att.work.hbm_bytes = 1e9;
  att.work.launches = 1;
  const double att_s = 1e15 / 989.4e12 + m.kernel_latency;
  EXPECT_NEAR(roofline(att, m).seconds, att_s, 1e-12 * att_s);
  EXPECT_NEAR(alone_in_simulator(att, m), att_s, 1e-9 * att_s);
}
