// Full-KV decode and prefill: the structural facts the cost model must get right.
#include <gtest/gtest.h>

#include "model/plan.hpp"
#include "test_util.hpp"
#include "policies/registry.hpp"

using namespace kvsim;

namespace {
struct Rig {
  ModelConfig model;
  GpuSpec gpu;
  HostSpec host;
  Calibration cal;
  Deployment dep;
  const Policy* full = find_policy("full");
  ParamValues params;
  Rig(const std::string& m, const std::string& g, int tp = 1, double hbm_eff = 1.0)
      : model(test::model(m)), gpu(test::gpu(g)), host(test::host(gpu.default_host)) {
    for (auto& e : cal.per_kind) e.of[size_t(Ceiling::hbm)] = hbm_eff;
    dep = make_deployment(model, gpu, host, cal, {.tensor_parallel = tp, .weight_dtype = model.dtype, .kv_dtype = model.dtype});
    params = full->defaults();
  }
  PlanResult plan(int64_t ctx, int64_t out, int64_t batch) const {
    return evaluate(DesignPoint{&dep, full, &params, ctx, out, batch});
  }
};
}  // namespace

// At batch 1 every decode phase is memory-bound, so the step is affine in context with slope
// KV bytes per token / effective HBM bandwidth (here with a calibrated HBM efficiency of 0.8).
TEST(FullDecode, TpotIsAffineInContextWithKvSlope) {
  for (const char* m : {"llama-3-8b", "llama-3.1-8b", "qwen2.5-14b", "longchat-7b"}) {
    SCOPED_TRACE(m);
    Rig s(m, "h100-sxm", 1, 0.8);
    const double slope_expected = s.model.kv_bytes_per_token(2) / (s.gpu.hbm_bandwidth * 0.8);
    const double t1 = decode_step_seconds(s.dep, *s.full, s.params, 1, 4096);
    const double t2 = decode_step_seconds(s.dep, *s.full, s.params, 1, 8192);
    const double t3 = decode_step_seconds(s.dep, *s.full, s.params, 1, 65536);
    EXPECT_NEAR((t2 - t1) / 4096, slope_expected, slope_expected * 1e-9);
    EXPECT_NEAR((t3 - t2) / (65536 - 8192), slope_expected, slope_expected * 1e-9);
  }
}

// TPOT is the mean over the generated tokens; the plan evaluates it at context + output/2, which for
// an affine step equals the explicit average over every decode step.
TEST(FullDecode, TpotEqualsMeanOfStepTimes) {
  Rig s("llama-3.1-8b", "h100-sxm");
  const int64_t ctx = 30000, out = 64;
  const PlanResult r = s.plan(ctx, out, 4);
  ASSERT_TRUE(r.feasible) << r.reason;
  double sum = 0;
  for (int64_t j = 1; j <= out - 1; ++j) sum += decode_step_seconds(s.dep, *s.full, s.params, 4, double(ctx + j));
  EXPECT_NEAR(r.tpot_s, sum / double(out - 1), r.tpot_s * 1e-9);
}

TEST(FullDecode, MemoryBoundAtBatchOne) {
  Rig s("llama-3.1-8b", "h100-sxm");
  const PlanResult r = s.plan(16384, 128, 1);
  ASSERT_TRUE(r.feasible);
  EXPECT_EQ(r.dominant, Bound::hbm);
  for (const auto& p : r.decode) EXPECT_NE(p.bound, Bound::compute) << p.phase.name;
}

// A weight GEMM turns compute-bound exactly where its arithmetic intensity crosses the ridge point
// (tensor peak / HBM bandwidth): below it, memory-bound; above it, compute-bound.
TEST(FullDecode, GemmTurnsComputeBoundExactlyAtTheRidge) {
  for (const char* g : {"h100-sxm", "a100-80g", "l40s"}) {
    SCOPED_TRACE(g);
    Rig s("llama-3.1-8b", g);
    const double ridge = s.gpu.tensor_bf16 / s.gpu.hbm_bandwidth;
    int flips = 0;
    bool was_compute = false;
    for (int B = 1; B <= 2048; ++B) {
      PhaseList ph;
      add_decode_dense_phases(s.dep, B, ph);
      const Phase& mlp = *std::find_if(ph.begin(), ph.end(), [](const Phase& p) { return p.name == "mlp"; });
      const double intensity = mlp.work.flops / mlp.work.hbm_bytes;
      const bool compute = roofline(mlp, s.dep.machine).bound == Bound::compute;
      EXPECT_EQ(compute, intensity > ridge) << "B=" << B << " intensity " << intensity << " ridge " << ridge;
      if (compute != was_compute) ++flips;
      was_compute = compute;
    }
    EXPECT_EQ(flips, 1) << "the MLP must cross the ridge once as the batch grows";
    EXPECT_TRUE(was_compute) << "at batch 2048 the MLP is compute-bound";
  }
}

// The max batch fits and one more does not; the report's HBM figure is within the usable HBM.
TEST(FullDecode, MaxBatchIsTheLargestThatFits) {
  Rig s("llama-3.1-8b", "h100-sxm");
  for (int64_t ctx : {4096, 16384, 131072}) {
    const PlanResult r = s.plan(ctx, 1024, 0);
    ASSERT_TRUE(r.feasible) << r.reason;
    EXPECT_EQ(r.batch, r.memory.max_batch);
    EXPECT_LE(r.memory.hbm_bytes, r.memory.hbm_usable);
    // KV at peak: batch * (context + output) * KV bytes per token.
    EXPECT_DOUBLE_EQ(r.memory.kv_hbm_bytes, double(r.batch) * (ctx + 1024) * s.model.kv_bytes_per_token(2));
    const PlanResult over = s.plan(ctx, 1024, r.batch + 1);
    EXPECT_FALSE(over.feasible);
    EXPECT_NE(over.reason.find("largest batch that fits is " + std::to_string(r.batch)), std::string::npos)
        << over.reason;
  }
}

TEST(FullDecode, InfeasibleSaysWhy) {
  Rig big("qwen2.5-14b", "rtx4090");  // 29.5 GB of bf16 weights on a 24 GB card
  const PlanResult r = big.plan(4096, 128, 0);
  EXPECT_FALSE(r.feasible);
  EXPECT_NE(r.reason.find("weights"), std::string::npos) << r.reason;
  Rig s("llama-3.1-8b", "rtx4090");  // weights fit, 128K of KV (16 GiB) does not
  const PlanResult k = s.plan(131072, 1024, 0);
  EXPECT_FALSE(k.feasible);
  EXPECT_NE(k.reason.find("one sequence needs"), std::string::npos) << k.reason;
}

TEST(FullDecode, TensorParallelAddsAllReduceAndCutsPerGpuWork) {
  Rig one("llama-3.1-8b", "h100-sxm", 1), two("llama-3.1-8b", "h100-sxm", 2);
  const PlanResult a = one.plan(16384, 256, 8), b = two.plan(16384, 256, 8);
  ASSERT_TRUE(a.feasible && b.feasible);
  EXPECT_LT(b.tpot_s, a.tpot_s);
  EXPECT_TRUE(std::any_of(b.decode.begin(), b.decode.end(), [](auto& p) { return p.phase.name == "allreduce"; }));
  EXPECT_FALSE(std::any_of(a.decode.begin(), a.decode.end(), [](auto& p) { return p.phase.name == "allreduce"; }));
  EXPECT_GT(b.memory.max_batch, 2 * a.memory.max_batch);  // half the weights and half the KV per GPU
}

// fp8 weights speed up the weight GEMMs, not attention: q.k and p.v stay 16-bit.
TEST(Prefill, Fp8WeightsDoNotSpeedUpAttention) {
  const ModelConfig m = test::model("llama-3.1-8b");
  const GpuSpec g = test::gpu("h100-sxm");
  const HostSpec h = test::host("sapphire-rapids-2s");
  Calibration cal;
  const Policy* full = find_policy("full");
  const ParamValues params = full->defaults();
  auto phase_ms = [&](DType w, const char* name) {
    const Deployment d = make_deployment(m, g, h, cal, {.weight_dtype = w});
    const PlanResult r = evaluate(DesignPoint{&d, full, &params, 65536, 16, 1});
    for (const auto& p : r.prefill)
      if (p.phase.name == name) return p.seconds;
    return -1.0;
  };
  EXPECT_DOUBLE_EQ(phase_ms(DType::fp8, "prefill_attention"), phase_ms(DType::bf16, "prefill_attention"));
  EXPECT_LT(phase_ms(DType::fp8, "prefill_gemm"), 0.6 * phase_ms(DType::bf16, "prefill_gemm"));
}

// Prefill grows faster than linearly in the prompt (the causal attention term) and is compute-bound.
TEST(Prefill, QuadraticAttentionTerm) {
  Rig s("llama-3.1-8b", "h100-sxm");
  const PlanResult a = s.plan(16384, 16, 1), b = s.plan(131072, 16, 1);
  ASSERT_TRUE(a.feasible && b.feasible);
  EXPECT_GT(b.ttft_s / a.ttft_s, 8.0 * 1.5);
  for (const auto& p : b.prefill) {
    if (p.phase.name == "prefill_attention" || p.phase.name == "prefill_gemm") {
      EXPECT_EQ(p.bound, Bound::compute) << p.phase.name;
    }
  }
  // The attention FLOPs are exactly 4 d (+5 softmax) per causal score per head and layer.
  const auto& att = *std::find_if(b.prefill.begin(), b.prefill.end(),
                                  [](auto& p) { return p.phase.name == "prefill_attention"; });
  const double n = 131072;
  EXPECT_DOUBLE_EQ(att.phase.work.flops, 32.0 * 32 * n * (n + 1) / 2 * (4 * 128 + 5));
}
