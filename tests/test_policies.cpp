// The policies as phases: interface, memory formulas from the seeds, and the structural behavior
// issue 3 asks the cost model to show.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "model/plan.hpp"
#include "policies/blocks.hpp"
#include "model/decode_graph.hpp"
#include "model/resources.hpp"
#include "test_util.hpp"
#include "policies/registry.hpp"
#include "replay/budget.hpp"

using namespace kvsim;

namespace {
struct Rig {
  ModelConfig model;
  GpuSpec gpu;
  HostSpec host;
  Calibration cal;
  Deployment dep;
  Rig(const std::string& m = "llama-3.1-8b", const std::string& g = "h100-sxm", const std::string& h = "")
      : model(test::model(m)), gpu(test::gpu(g)), host(test::host(h.empty() ? gpu.default_host : h)) {
    cal.half_run_bytes[size_t(Ceiling::hbm)] = 64;  // the library's roofline gather costs
    cal.half_run_bytes[size_t(Ceiling::dram)] = 64;
    cal.half_run_bytes[size_t(Ceiling::h2d)] = 24;
    cal.half_run_bytes[size_t(Ceiling::d2h)] = 24;
    dep = make_deployment(model, gpu, host, cal, {.weight_dtype = model.dtype, .kv_dtype = model.dtype});
  }
  const Policy& pol(const std::string& n) const { return *find_policy(n); }
  ParamValues params(const std::string& n, std::map<std::string, double> set = {}) const {
    const Policy& p = pol(n);
    ParamValues v = p.defaults();
    for (auto& [k, x] : set) {
      const int i = p.param_index(k);
      EXPECT_GE(i, 0) << n << "." << k;
      v[size_t(i)] = x;
    }
    return v;
  }
  StepResult step(const std::string& n, double batch, double prompt, std::map<std::string, double> set = {}) const {
    return decode_step(dep, pol(n), params(n, set), StepShape{batch, prompt, 0});
  }
  PlanResult plan(const std::string& n, int64_t ctx, int64_t batch, std::map<std::string, double> set = {}) const {
    const ParamValues v = params(n, set);
    return evaluate(DesignPoint{&dep, &pol(n), &v, ctx, 1024, batch});
  }
};

double phase_seconds(const StepResult& r, std::initializer_list<std::string_view> names) {
  double s = 0;
  for (const auto& p : r.phases)
    for (auto n : names)
      if (p.phase.name == n) s += p.seconds;
  return s;
}

// A knob's value by name in a policy's parameter values.
double knob(const Policy& pol, const ParamValues& v, const char* name) { return v[size_t(pol.param_index(name))]; }

}  // namespace

// The parameter names are part of the interface: scenario files and sweeps use them.
TEST(Policies, RegistryAndParameterNames) {
  const std::map<std::string, std::vector<std::string>> expected = {
      {"full", {}},
      {"streaming", {"sinks", "window"}},
      {"snapkv", {"budget_tokens", "obs_window", "pool_kernel"}},
      {"quest", {"page_size", "budget_tokens"}},
      {"chess", {"page_size", "chunk_pages", "grid_chunks", "rho_grid", "rho_chunk", "rho_page", "sink_pages",
                 "window_pages", "reselect_pages"}},
      {"sentencekv", {"token_budget", "keep_factor", "obs_window", "sinks", "recent", "mean_sentence_tokens", "reselect",
                      "kept_kv_on", "kept_sentences"}},
      {"chunkkv", {"chunk_size", "budget_ratio", "budget_tokens", "obs_window", "reuse_layers"}},
      {"sekv", {"budget_ratio", "max_rank", "routing_dim", "alpha", "min_span", "local_window", "mean_span_tokens",
                "anchor_ratio", "zoom_rate", "rank_ratio"}},
      {"ctkvr", {"centroids", "probes", "per_centroid", "budget_tokens", "init_tokens", "local_tokens", "dedup",
                 "rerank_on"}},
  };
  ASSERT_EQ(all_policies().size(), expected.size());
  for (const auto& [name, params] : expected) {
    const Policy* p = find_policy(name);
    ASSERT_NE(p, nullptr) << name;
    std::vector<std::string> got;
    for (const auto& s : p->params()) {
      got.push_back(s.name);
      EXPECT_TRUE(s.range.contains(s.default_value)) << name << "." << s.name;
      EXPECT_FALSE(s.doc.empty()) << name << "." << s.name;
    }
    EXPECT_EQ(got, params) << name;
  }
  // Paper defaults that the seeds state outright.
  Rig r;
  EXPECT_EQ(r.params("chess")[0], 32);                                                   // page size
  EXPECT_DOUBLE_EQ(r.params("chess")[3] * r.params("chess")[4] * r.params("chess")[5], 0.01);  // 1% budget
  EXPECT_EQ(r.params("chunkkv")[0], 10);
  EXPECT_EQ(r.params("sekv")[1], 32);
  EXPECT_EQ(r.params("ctkvr")[1], 4);
  EXPECT_EQ(r.params("sentencekv")[0], 1024);
}

// Full KV grows linearly with context; at fixed token budgets SentenceKV and CTKVR grow only by their
// scoring terms. CHESS and SEKV set budgets as ratios of the context (rho's, budget_ratio): their
// attention grows by that ratio of full KV's slope, plus their selection/summary terms — and, for
// SEKV, whose zoomed spans fill the budget (§3.3, §4.1), by the factors fetched over PCIe each step.
TEST(Policies, FixedBudgetTpotGrowsOnlyByScoringTerms) {
  Rig r;
  const double n1 = 32768, n2 = 131072;
  const double full_growth = r.step("full", 1, n2).seconds - r.step("full", 1, n1).seconds;
  EXPECT_GT(full_growth, 0.003);
  const std::map<std::string, std::vector<std::string_view>> scoring = {
      {"sentencekv", {"sentence_score", "sentence_select", "load_kv"}},  // load_kv: shorter runs as r tau spreads
      {"ctkvr", {"centroid_recall", "probe_dedup"}},
  };
  for (const auto& [name, phases] : scoring) {
    SCOPED_TRACE(name);
    const StepResult a = r.step(name, 1, n1), b = r.step(name, 1, n2);
    double sa = 0, sb = 0;
    for (auto ph : phases) sa += phase_seconds(a, {ph}), sb += phase_seconds(b, {ph});
    const double other_growth = (b.serial_seconds - sb) - (a.serial_seconds - sa);
    EXPECT_LT(std::abs(other_growth), 0.002 * a.serial_seconds);
    EXPECT_LT(b.seconds - a.seconds, 0.1 * full_growth);
  }
  // CHESS at the paper's 1% working set: paged attention grows by ~1% of full attention's growth.
  const StepResult c1 = r.step("chess", 1, n1), c2 = r.step("chess", 1, n2);
  const StepResult f1 = r.step("full", 1, n1), f2 = r.step("full", 1, n2);
  const double att = phase_seconds(c2, {"paged_attention"}) - phase_seconds(c1, {"paged_attention"});
  const double fatt = phase_seconds(f2, {"attention"}) - phase_seconds(f1, {"attention"});
  EXPECT_NEAR(att / fatt, 0.01, 0.002);
  const double other = (c2.serial_seconds - phase_seconds(c2, {"paged_attention", "select_gemv", "hier_mask"})) -
                       (c1.serial_seconds - phase_seconds(c1, {"paged_attention", "select_gemv", "hier_mask"}));
  EXPECT_LT(std::abs(other), 1e-6);
  const StepResult s1 = r.step("sekv", 1, n1), s2 = r.step("sekv", 1, n2);
  EXPECT_GT(s2.seconds - s1.seconds, 0);
  // Stage 1 (resident set) and stage 2 (reconstructed tokens) attend at most the budget, 10% of the
  // prompt in token-equivalents, the summaries taking part of it.
  const double satt = phase_seconds(s2, {"coarse_attention", "fine_attention"}) -
                      phase_seconds(s1, {"coarse_attention", "fine_attention"});
  EXPECT_GT(satt, 0.05 * fatt);
  EXPECT_LT(satt, 0.1 * fatt);
  // Everything else that grows is routing, selection, the fetch and the reconstruction.
  const std::initializer_list<std::string_view> sekv_phases = {"route", "zoom_select", "fetch_factors",
                                                               "coarse_attention", "reconstruct", "fine_attention"};
  EXPECT_LT(std::abs((s2.serial_seconds - phase_seconds(s2, sekv_phases)) -
                     (s1.serial_seconds - phase_seconds(s1, sekv_phases))),
            1e-6);
}

// SentenceKV's and SEKV's transfers are on the H2D link, and at a large batch they bound the step.
TEST(Policies, SentenceKvAndSekvTransfersUseH2d) {
  Rig r;
  for (const char* name : {"sentencekv", "sekv"}) {
    SCOPED_TRACE(name);
    const StepResult s = r.step(name, 32, 65536);
    double h2d = 0;
    for (const auto& p : s.phases) h2d += p.phase.work.h2d_bytes;
    EXPECT_GT(h2d, 0);
    EXPECT_TRUE(s.simulated);
    const PlanResult pr = r.plan(name, 65536, 32);
    ASSERT_TRUE(pr.feasible) << pr.reason;
    EXPECT_EQ(pr.dominant, Bound::h2d);
  }
  // per_sentence reselection amortizes the copy over a sentence's tokens.
  const double per_step = phase_seconds(r.step("sentencekv", 8, 65536), {"load_kv"});
  const double per_sentence = phase_seconds(r.step("sentencekv", 8, 65536, {{"reselect", 1}}), {"load_kv"});
  EXPECT_NEAR(per_sentence * 28, per_step, 1e-9 * per_step);
}

// SentenceKV's two storage readings, by hand (Llama-3.1-8B bf16: L = 32, H = 32, Hkv = 8, d = 128, one
// token's KV = 2 L Hkv d 2 = 131072 B, one key row 256 B, one layer's K and V of a token 4096 B). tau =
// 1024 and r = 2 count the a = 32 + 32 sinks and recent tokens (§4.1): c = 2048 - 64 = 1984 tokens are
// kept for retrieval, tau - a = 960 are retrieved per step.
TEST(Policies, SentenceKvKeptKvOnCpuOrGpu) {
  Rig r;
  const double L = 32, hq = 32, hkv = 8, d = 128, tok = 131072, key = 256, row = 4096;
  const double n = 65536, out = 100, S = 500, a = 64, c = 1984, t = 960;
  const Policy& pol = r.pol("sentencekv");
  auto v = [&](double on) { return r.params("sentencekv", {{"kept_kv_on", on}, {"kept_sentences", S}}); };
  // Memory per tier.
  const MemoryDemand cpu = pol.memory(r.dep, v(0), n, out), gpu = pol.memory(r.dep, v(1), n, out);
  EXPECT_DOUBLE_EQ(cpu.kv_hbm_per_seq, (a + t + out) * tok);  // sinks + recent + staged + generated
  EXPECT_DOUBLE_EQ(cpu.hbm_per_seq, (a + t + out) * tok + S * L * hkv * key);
  EXPECT_DOUBLE_EQ(cpu.kv_dram_per_seq, c * tok);
  EXPECT_DOUBLE_EQ(cpu.dram_per_seq, c * tok);
  EXPECT_DOUBLE_EQ(gpu.kv_hbm_per_seq, (a + c + out) * tok);  // every kept token stays in HBM
  EXPECT_DOUBLE_EQ(gpu.hbm_per_seq, (a + c + out) * tok + S * L * hkv * key);
  EXPECT_DOUBLE_EQ(gpu.kv_dram_per_seq, 0);
  EXPECT_DOUBLE_EQ(gpu.dram_per_seq, 0);
  EXPECT_DOUBLE_EQ(cpu.hbm_fixed, n * row);
  EXPECT_DOUBLE_EQ(gpu.hbm_fixed, n * row);

  // Decode phases of B = 2 sequences that have generated 10 tokens.
  const double B = 2, g = 10;
  auto phases = [&](double on) {
    PhaseList ph;
    pol.decode_attention(r.dep, v(on), StepShape{B, n, g}, ph);
    return ph;
  };
  auto names = [](const PhaseList& ph) {
    std::vector<std::string> x;
    for (const auto& p : ph) x.emplace_back(p.name);
    return x;
  };
  const PhaseList pc = phases(0), pg = phases(1);
  EXPECT_EQ(names(pc), (std::vector<std::string>{"sentence_score", "sentence_select", "load_kv", "attention"}));
  EXPECT_EQ(names(pg), (std::vector<std::string>{"sentence_score", "sentence_select", "sentence_mask", "attention"}));
  for (const PhaseList* ph : {&pc, &pg}) {  // scoring and sorting the S sentence vectors: the same in both
    EXPECT_DOUBLE_EQ((*ph)[0].work.flops, L * B * hq * S * (2 * d + 2) + 2 * L * B * hq * d);
    EXPECT_DOUBLE_EQ((*ph)[0].work.hbm_bytes, L * B * (hkv * S * d * 2 + 4 * hq * S + hq * d * 2));
    EXPECT_DOUBLE_EQ((*ph)[1].work.flops, 4 * L * B * hkv * S);
  }
  // cpu: the tau - a retrieved tokens cross PCIe, in runs of c / S kept tokens per sentence; attention
  // reads sinks + recent + retrieved + generated.
  EXPECT_DOUBLE_EQ(pc[2].work.h2d_bytes, L * B * t * row);
  EXPECT_DOUBLE_EQ(pc[2].work.dram_bytes, L * B * t * row);
  EXPECT_DOUBLE_EQ(pc[2].run_bytes, c / S * key);
  EXPECT_EQ(pc[2].stream, Stream::h2d);
  EXPECT_DOUBLE_EQ(pc[3].work.flops, L * B * hq * (a + t + g) * (4 * d + 5));
  // gpu: no copy; a one-byte mask per KV head over the kept and generated tokens, and attention dense over
  // all of them (masked), reading the mask.
  EXPECT_DOUBLE_EQ(pg[2].work.hbm_bytes, L * B * hkv * (a + c + g));
  EXPECT_EQ(pg[2].device, Device::gpu);
  EXPECT_DOUBLE_EQ(pg[3].work.flops, L * B * hq * (a + c + g) * (4 * d + 5));
  const Phase dense = blocks::attention(r.dep, "attention", B, a + c + g, 0, true);
  EXPECT_DOUBLE_EQ(pg[3].work.hbm_bytes, dense.work.hbm_bytes + L * B * hkv * (a + c + g));
  for (const Phase& p : pg) {
    EXPECT_EQ(p.work.h2d_bytes, 0) << p.name;
    EXPECT_EQ(p.work.d2h_bytes, 0) << p.name;
    EXPECT_EQ(p.work.dram_bytes, 0) << p.name;
    EXPECT_EQ(p.stream, Stream::gpu) << p.name;
  }

  // Prefill: cpu packs and offloads the c retrievable tokens; gpu compacts all a + c kept tokens in HBM.
  PhaseList fc, fg;
  pol.prefill(r.dep, v(0), n, fc);
  pol.prefill(r.dep, v(1), n, fg);
  EXPECT_EQ(names(fc), (std::vector<std::string>{"window_scores", "topk_tokens", "sentence_means", "pack_kept", "offload"}));
  EXPECT_EQ(names(fg), (std::vector<std::string>{"window_scores", "topk_tokens", "sentence_means", "pack_kept"}));
  EXPECT_DOUBLE_EQ(fc[4].work.d2h_bytes, L * c * row);
  EXPECT_DOUBLE_EQ(fc[3].work.hbm_bytes, 2 * L * c * row);
  EXPECT_DOUBLE_EQ(fg[3].work.hbm_bytes, 2 * L * (a + c) * row);
  EXPECT_DOUBLE_EQ(fc[2].work.hbm_bytes, L * hkv * (c + S) * key);
  for (const Phase& p : fg) EXPECT_EQ(p.work.h2d_bytes + p.work.d2h_bytes, 0) << p.name;

  // The whole decode step and the plan: gpu moves no byte over PCIe and keeps no host DRAM.
  for (const auto& p : decode_step(r.dep, pol, v(1), StepShape{B, n, g}).phases) {
    EXPECT_EQ(p.phase.work.h2d_bytes, 0) << p.phase.name;
    EXPECT_EQ(p.phase.work.d2h_bytes, 0) << p.phase.name;
  }
  const PlanResult plan_cpu = r.plan("sentencekv", 65536, 4, {{"kept_kv_on", 0}});
  const PlanResult plan_gpu = r.plan("sentencekv", 65536, 4, {{"kept_kv_on", 1}});
  ASSERT_TRUE(plan_cpu.feasible && plan_gpu.feasible);
  EXPECT_EQ(plan_gpu.memory.kv_dram_bytes, 0);
  EXPECT_GT(plan_cpu.memory.kv_dram_bytes, 0);
  EXPECT_GT(plan_gpu.memory.kv_hbm_bytes, plan_cpu.memory.kv_hbm_bytes);
}

// Sentence vectors only for sentences that hold kept tokens. Without a measured count the cost model
// estimates it from the parameters: c kept tokens spread uniformly over the n - a candidate tokens cut
// into sentences of s tokens occupy (n - a)/s (1 - (1 - c/(n - a))^s) sentences.
TEST(Policies, SentenceKvVectorsOnlyForSentencesWithKeptTokens) {
  Rig r;
  const double L = 32, hkv = 8, key = 256, B = 1;
  const Policy& pol = r.pol("sentencekv");
  auto vectors = [&](double n, std::map<std::string, double> set) {
    const MemoryDemand m = pol.memory(r.dep, r.params("sentencekv", set), n, 0);
    return (m.hbm_per_seq - m.kv_hbm_per_seq) / (L * hkv * key);
  };
  // Defaults at 64K: c = 1984 of 65472 candidates, s = 28: 2338.3 (1 - 0.9697^28) = 1350.4 sentences,
  // fewer than the 1984 an upper bound of one sentence per kept token gives.
  EXPECT_NEAR(vectors(65536, {}), 1350.400119, 1e-5);
  // Every candidate kept (8192 tokens, r tau = 2048 + a... r = 8): all (n - a)/s sentences have a vector.
  EXPECT_NEAR(vectors(8192, {{"keep_factor", 8}}), (8192 - 64) / 28.0, 1e-9);
  // One-token sentences: one vector per kept token.
  EXPECT_NEAR(vectors(65536, {{"mean_sentence_tokens", 1}}), 1984, 1e-9);
  // A measured count replaces the estimate, bounded by the kept tokens and the sentences.
  EXPECT_DOUBLE_EQ(vectors(65536, {{"kept_sentences", 700}}), 700);
  EXPECT_DOUBLE_EQ(vectors(65536, {{"kept_sentences", 5000}}), 1984);
  EXPECT_DOUBLE_EQ(vectors(1064, {{"kept_sentences", 900}}), 36);  // ceil(1000 / 28) sentences
  // The scoring GEMV and the sort run over the same count.
  PhaseList ph;
  pol.decode_attention(r.dep, r.params("sentencekv", {{"kept_sentences", 700}}), StepShape{B, 65536, 0}, ph);
  EXPECT_DOUBLE_EQ(ph[1].work.flops, 4 * L * B * hkv * 700);
  PhaseList est;
  pol.decode_attention(r.dep, r.params("sentencekv"), StepShape{B, 65536, 0}, est);
  EXPECT_NEAR(est[1].work.flops, 4 * L * B * hkv * 1350.400119, 1e-3);
}

// CTKVR's rerank and sparse attention run on the host, beside the GPU; on a host with little DRAM
// bandwidth they become the bottleneck of the step. At batch 16 the per-head host work has 16 x 8 = 128
// pieces, enough for every one of the big host's 112 cores (at batch 4, 32 pieces use 32 of them:
// model/roofline.hpp, host_limits, and Roofline.PerHeadHostWorkRunsInParallel...), so the two hosts
// differ by their DRAM bandwidth and cores, not by how the work splits.
TEST(Policies, CtkvrHostPhasesBindOnALowBandwidthHost) {
  Rig big("llama-3.1-8b", "h100-sxm", "sapphire-rapids-2s"), small("llama-3.1-8b", "h100-sxm", "ci-2core");
  for (const auto& p : big.step("ctkvr", 16, 32768).phases)
    if (p.phase.name == "cpu_rerank" || p.phase.name == "cpu_attention") {
      EXPECT_EQ(p.phase.device, Device::cpu);
      EXPECT_GT(p.phase.work.dram_bytes, 0);
      EXPECT_EQ(p.phase.lanes, 16 * 8);
    }
  const StepResult a = big.step("ctkvr", 16, 32768), b = small.step("ctkvr", 16, 32768);
  EXPECT_GT(b.seconds, 3 * a.seconds);
  const double host_part = phase_seconds(b, {"cpu_rerank", "cpu_attention"});
  EXPECT_GT(host_part, 0.8 * b.seconds);
  // And the overlap is real: the simulated step is shorter than its phases in series.
  EXPECT_LT(a.seconds, a.serial_seconds * 0.95);
  // rerank_on=gpu moves the recalled keys over PCIe instead and uses no host compute.
  const StepResult g = big.step("ctkvr", 4, 32768, {{"rerank_on", 1}});
  for (const auto& p : g.phases) EXPECT_NE(p.phase.device, Device::cpu) << p.phase.name;
}

// CHESS's selection is a GEMV over vectors that grow with the context while its attention does not:
// the selection's share of the step grows with context.
TEST(Policies, ChessSelectionShareGrowsWithContext) {
  Rig r;
  double last = 0;
  for (double n : {8192.0, 32768.0, 131072.0}) {
    const StepResult s = r.step("chess", 8, n);
    const double share = phase_seconds(s, {"select_gemv", "hier_mask"}) / s.seconds;
    EXPECT_GT(share, last) << n;
    last = share;
  }
}

// Layer-wise index reuse scores one layer in N_reuse: the prefill scoring cost is divided by N_reuse.
TEST(Policies, ChunkKvReuseDividesPrefillScoring) {
  Rig r;  // 32 layers
  auto scoring = [&](double reuse) {
    PhaseList out;
    r.pol("chunkkv").prefill(r.dep, r.params("chunkkv", {{"reuse_layers", reuse}}), 65536, out);
    double flops = 0;
    for (const auto& p : out)
      if (p.name == "window_scores") flops += p.work.flops;
    return flops;
  };
  EXPECT_DOUBLE_EQ(scoring(1) / scoring(2), 2.0);
  EXPECT_DOUBLE_EQ(scoring(1) / scoring(4), 4.0);
}

// §4.1.1: rho = 2.5 rho'. By default per_centroid follows budget_tokens; a value set keeps its own.
TEST(Policies, CtkvrRhoIsTwoAndAHalfTimesRhoPrimeUnlessSet) {
  Rig r;
  const Policy& ct = r.pol("ctkvr");
  const double L = r.model.layers, hkv = r.model.kv_heads, C = 1024, hq = r.dep.hq, d = 128, ba = r.dep.ba;
  auto index = [&](std::map<std::string, double> set) {
    return ct.memory(r.dep, r.params("ctkvr", std::move(set)), 65536, 0).index_hbm_per_seq;
  };
  const double queries = L * hq * C * d * ba;
  EXPECT_DOUBLE_EQ(index({}), L * hkv * C * 2560 * 4 + queries);                       // rho' 1024 -> 2560
  EXPECT_DOUBLE_EQ(index({{"budget_tokens", 512}}), L * hkv * C * 1280 * 4 + queries);  // rho' 512 -> 1280
  EXPECT_DOUBLE_EQ(index({{"budget_tokens", 333}}), L * hkv * C * 833 * 4 + queries);   // ceil(832.5)
  EXPECT_DOUBLE_EQ(index({{"budget_tokens", 512}, {"per_centroid", 2000}}), L * hkv * C * 2000 * 4 + queries);
  // The replay's budget axis moves rho' and so rho, and leaves an explicit per_centroid alone.
  ParamValues v = ct.defaults();
  ASSERT_TRUE(replay::set_budget(ct, v, 131072, 8192));
  const double rho_prime = v[size_t(ct.param_index("budget_tokens"))];
  EXPECT_EQ(v[size_t(ct.param_index("per_centroid"))], 0.0);
  EXPECT_DOUBLE_EQ(ct.memory(r.dep, v, 131072, 0).index_hbm_per_seq,
                   L * hkv * C * std::ceil(2.5 * rho_prime) * 4 + queries);
}

// The budget axis scales init + local to the paper's 5% of the context (§3.1.1: 128 + 6,400 of 131,072),
// each at least one token: below 512 prompt tokens 128/131072 of the prompt rounds to 0, and a CTKVR with
// no initial (sink) token is not the paper's.
TEST(Policies, CtkvrBudgetAxisScalesInitAndLocalAndKeepsOneOfEach) {
  Rig r;
  const Policy& ct = r.pol("ctkvr");
  ParamValues v = ct.defaults();
  ASSERT_TRUE(replay::set_budget(ct, v, 131072, 8192));
  EXPECT_EQ(knob(ct, v, "init_tokens"), 128.0);
  EXPECT_EQ(knob(ct, v, "local_tokens"), 6400.0);
  EXPECT_EQ(knob(ct, v, "budget_tokens"), 8192.0 - 6528.0);
  v = ct.defaults();
  ASSERT_TRUE(replay::set_budget(ct, v, 256, 64));  // 256·128/131072 = 0.25, 256·6400/131072 = 12.5
  EXPECT_EQ(knob(ct, v, "init_tokens"), 1.0);
  EXPECT_EQ(knob(ct, v, "local_tokens"), 13.0);
  EXPECT_EQ(knob(ct, v, "budget_tokens"), 64.0 - 14.0);
  v = ct.defaults();
  EXPECT_FALSE(replay::set_budget(ct, v, 256, 14));  // nothing left for rho'
}

// SEKV's budget axis: budget_ratio = B / P, never above 1 (a budget above the prompt attends all of it),
// and the local window at most B / 2.
TEST(Policies, SekvBudgetAxisIsTheRatioCappedAtOne) {
  Rig r;
  const Policy& se = r.pol("sekv");
  ParamValues v = se.defaults();
  ASSERT_TRUE(replay::set_budget(se, v, 1000, 4000));
  EXPECT_EQ(knob(se, v, "budget_ratio"), 1.0);
  EXPECT_EQ(knob(se, v, "local_window"), std::min(knob(se, se.defaults(), "local_window"), 2000.0));
  v = se.defaults();
  ASSERT_TRUE(replay::set_budget(se, v, 1000, 200));
  EXPECT_DOUBLE_EQ(knob(se, v, "budget_ratio"), 0.2);
  EXPECT_EQ(knob(se, v, "local_window"), std::min(knob(se, se.defaults(), "local_window"), 100.0));
}

// The index is what CTKVR pays to offload; when it is larger than the KV it moves out of HBM, the plan says so.
TEST(Policies, CtkvrNotesWhenItsIndexExceedsTheKvItReplaces) {
  Rig r;
  // Defaults (C = 1024, rho = 2560, init + local = 6528) on llama-3.1-8b: per layer 90,112 B per centroid
  // against 4,096 B per offloaded token: the index is larger below about 29K tokens.
  const auto note_of = [](const PlanResult& p) {
    for (const std::string& n : p.notes)
      if (n.find("the index exceeds the KV it replaces") != std::string::npos) return n;
    return std::string();
  };
  const PlanResult small = r.plan("ctkvr", 16384, 1);
  ASSERT_TRUE(small.feasible) << small.reason;
  const std::string n = note_of(small);
  EXPECT_NE(n.find("C = 1024 centroids x rho = 2560"), std::string::npos) << n;
  EXPECT_NE(n.find("2816.0 MiB"), std::string::npos) << n;  // 32 layers x 1024 x 90,112 B
  EXPECT_NE(n.find("1360.0 MiB"), std::string::npos) << n;  // 32 layers x (16384 + 1024 - 6528) x 4,096 B
  EXPECT_EQ(note_of(r.plan("ctkvr", 131072, 1)), "");
  // Fewer centroids: the same context without the note.
  EXPECT_EQ(note_of(r.plan("ctkvr", 16384, 1, {{"centroids", 128}})), "");
}

// Memory formulas from the seeds, exactly.
TEST(Policies, CtkvrIndexIsHkvTimesCTimesRhoInt32PerLayer) {
  Rig r;
  const double L = r.model.layers, hkv = r.model.kv_heads, C = 512;
  auto hbm = [&](double rho) {
    return r.pol("ctkvr").memory(r.dep, r.params("ctkvr", {{"centroids", C}, {"per_centroid", rho}}), 65536, 0).hbm_per_seq;
  };
  EXPECT_DOUBLE_EQ(hbm(2560) - hbm(1280), L * hkv * C * 1280 * 4);
  // The seed's footnote 5: b, g, C, rho = 1, 4, 512, 2560 is 20 MB per layer.
  EXPECT_NEAR(4 * C * 2560 * 4 / 1e6, 20.97, 0.01);
}

// The system experiments' C = 1024 (App. C.2) is the default; centroids = 0 selects the accuracy setup
// of §4.1.1, "CTKVR is configured with C = min(2048, dataset length / 16)".
// By hand, llama-3.1-8b (L 32, hq 32, hkv 8, d 128, bf16 activations), rho = 2.5 rho' = 2560:
//   C = 1024: per sequence and layer the qcIVF is 8·1024·2560·4 = 83,886,080 B (80 MiB) and the
//     centroid queries 32·1024·128·2 = 8,388,608 B (8 MiB): at n = 16384 that is also §4.1.1's 16384/16.
//   §4.1.1 at n = 131072 (> 2048·16): C = min(2048, 8192) = 2048: 167,772,160 + 16,777,216 = 184,549,376 B.
TEST(Policies, CtkvrCentroidsFollowAppC2AndSection411OnRequest) {
  Rig r;
  const Policy& ct = r.pol("ctkvr");
  ASSERT_EQ(ct.param_index("centroids"), 0);
  EXPECT_EQ(ct.defaults()[0], 1024.0);  // App. C.2
  ASSERT_EQ(r.model.layers, 32);
  ASSERT_EQ(r.model.kv_heads, 8);
  ASSERT_EQ(r.dep.hq, 32);
  ASSERT_EQ(r.dep.ba, 2);
  const double per_layer_16k = 8.0 * 1024 * 2560 * 4 + 32.0 * 1024 * 128 * 2;
  const double per_layer_128k = 8.0 * 2048 * 2560 * 4 + 32.0 * 2048 * 128 * 2;
  EXPECT_EQ(per_layer_16k, 92274688.0);
  EXPECT_EQ(per_layer_128k, 184549376.0);
  const ParamValues def = r.params("ctkvr", {{"centroids", 0}});  // §4.1.1's rule
  EXPECT_DOUBLE_EQ(ct.memory(r.dep, def, 16384, 0).index_hbm_per_seq, 32 * per_layer_16k);
  EXPECT_DOUBLE_EQ(ct.memory(r.dep, def, 131072, 0).index_hbm_per_seq, 32 * per_layer_128k);
  // The default C = 1024 at 131072 is the 16K figure of the rule.
  EXPECT_DOUBLE_EQ(ct.memory(r.dep, ct.defaults(), 131072, 0).index_hbm_per_seq, 32 * per_layer_16k);
  // The index is part of the HBM per sequence: the KV kept on the GPU plus the index.
  const MemoryDemand m = ct.memory(r.dep, def, 131072, 1024);
  EXPECT_DOUBLE_EQ(m.hbm_per_seq, m.kv_hbm_per_seq + m.index_hbm_per_seq);
  // The decode step's centroid_recall scores C centroids per query head: 2048 at 131072, 1024 at 16384.
  auto recall_flops = [&](double prompt) {
    const StepResult st = decode_step(r.dep, ct, def, StepShape{1, prompt, 0});
    for (const auto& p : st.phases)
      if (p.phase.name == "centroid_recall") return p.phase.work.flops;
    return 0.0;
  };
  EXPECT_DOUBLE_EQ(recall_flops(131072) / recall_flops(16384), 2.0);
  // Prefill: qcivf_topk selects rho of n for each of hkv·C rows: the C there follows the rule too.
  PhaseList pre;
  ct.prefill(r.dep, def, 16384, pre);
  for (const auto& p : pre)
    if (p.name == "qcivf_topk") { EXPECT_DOUBLE_EQ(p.work.hbm_bytes, 32.0 * 8 * 1024 * (4 * 16384 + 4 * 2560)); }
  // The plan reports it: per sequence and layer, and at the batch over all layers (the default C = 1024).
  const PlanResult pr = r.plan("ctkvr", 131072, 2);
  ASSERT_TRUE(pr.feasible) << pr.reason;
  EXPECT_DOUBLE_EQ(pr.memory.index_hbm_bytes_per_seq_layer, per_layer_16k);
  EXPECT_DOUBLE_EQ(pr.memory.index_hbm_bytes, 2 * 32 * per_layer_16k);
  // A policy with no index reports none.
  EXPECT_EQ(r.plan("full", 16384, 1).memory.index_hbm_bytes, 0.0);
}

// The seeds compare at equal batch (CTKVR §4.2, Fig. 7). Llama-3.1-8B on an H100 at 131072 + 1024:
// full KV fits fewer sequences than ctkvr (which keeps only init + local in HBM), so ctkvr at full KV's
// batch is a different point from ctkvr at its own max batch. At equal batch B and tensor parallelism
// tp the throughput ratio is (B / T_ctkvr / tp) / (B / T_full / tp) = T_full / T_ctkvr.
TEST(Policies, ThroughputAtFullKvBatchIsTheTpotRatio) {
  Rig r;
  const PlanResult full = r.plan("full", 131072, 0), own = r.plan("ctkvr", 131072, 0);
  ASSERT_TRUE(full.feasible && own.feasible) << full.reason << own.reason;
  ASSERT_GT(own.batch, full.batch);
  std::vector<PlanResult> res{own, full};
  const std::vector<PlanResult> ref{full};
  compare_to_full(res, ref);
  compare_at_full_batch(res, ref, r.dep);
  ASSERT_TRUE(res[0].has_at_full_batch);
  const PlanResult::AtBatch& a = res[0].at_full_batch;
  EXPECT_EQ(a.batch, full.batch);
  ASSERT_TRUE(a.feasible) << a.reason;
  // The same point planned directly at that batch.
  const PlanResult eq = r.plan("ctkvr", 131072, full.batch);
  ASSERT_TRUE(eq.feasible);
  EXPECT_DOUBLE_EQ(a.tpot_s, eq.tpot_s);
  EXPECT_DOUBLE_EQ(a.throughput_tok_s, double(full.batch) / eq.tpot_s / r.dep.tp);
  // By hand from the two TPOTs.
  EXPECT_NEAR(a.throughput_vs_full, full.tpot_s / eq.tpot_s, 1e-12);
  EXPECT_NEAR(a.throughput_vs_full, a.throughput_tok_s / full.throughput_tok_s, 1e-12);
  // ...and not the ratio at each policy's own max batch, which also counts the larger batch.
  const double own_ratio = (double(own.batch) / own.tpot_s) / (double(full.batch) / full.tpot_s);
  EXPECT_NEAR(res[0].speedup_vs_full, own_ratio, 1e-12);
  EXPECT_GT(std::abs(res[0].speedup_vs_full / a.throughput_vs_full - 1), 0.05)
      << res[0].speedup_vs_full << " vs " << a.throughput_vs_full;
  // Full KV against itself: the same batch, ratio 1.
  ASSERT_TRUE(res[1].has_at_full_batch);
  EXPECT_EQ(res[1].at_full_batch.batch, full.batch);
  EXPECT_DOUBLE_EQ(res[1].at_full_batch.throughput_vs_full, 1.0);
}

// Where full KV's batch does not fit the policy, the equal-batch point is infeasible, with the reason.
// At 8192 + 1024 ctkvr keeps 6528 tokens in HBM (0.80 GiB) plus a C = 512 index (1.38 GiB) per sequence,
// more than full KV's 1.125 GiB per sequence, so full KV's max batch is above ctkvr's.
TEST(Policies, AtFullKvBatchInfeasibleWhenThatBatchDoesNotFit) {
  Rig r;
  const PlanResult full = r.plan("full", 8192, 0), own = r.plan("ctkvr", 8192, 0);
  ASSERT_TRUE(full.feasible && own.feasible);
  ASSERT_LT(own.batch, full.batch);
  std::vector<PlanResult> res{own};
  compare_at_full_batch(res, {full}, r.dep);
  ASSERT_TRUE(res[0].has_at_full_batch);
  EXPECT_FALSE(res[0].at_full_batch.feasible);
  EXPECT_NE(res[0].at_full_batch.reason.find("the largest batch that fits is " + std::to_string(own.batch)),
            std::string::npos)
      << res[0].at_full_batch.reason;
  EXPECT_EQ(res[0].at_full_batch.throughput_vs_full, 0.0);
}

TEST(Policies, SekvCpuStorePerSpan) {
  Rig r;
  const double L = r.model.layers, hkv = r.model.kv_heads, d = r.model.head_dim, b = 2;
  const double S = 64, spans = 100, rank = 8;  // rank_ratio 0.25 of min(|S|, d, R_max = 32)
  const MemoryDemand m = r.pol("sekv").memory(
      r.dep,
      r.params("sekv", {{"mean_span_tokens", S}, {"anchor_ratio", 0}, {"local_window", 0}, {"rank_ratio", 0.25}}),
      S * spans, 0);
  EXPECT_DOUBLE_EQ(m.dram_per_seq, spans * 2 * L * hkv * rank * (S + d + 1) * b);
}

// SEKV's zoom by default fills the GPU-resident budget (§3.3, §4.1). By hand, llama-3.1-8b (L 32, hq 32,
// hkv 8, d 128, g 4, bf16), P = 65536, defaults (beta 0.1, w 512, a 0.03, |S| 32, d' 32, r = 16):
//   F = 512 + 0.03 x 65024 = 2462.72;  C_m = 0.97 x 65024 = 63073.28;  m = ceil(C_m / 32) = 1972
//   summaries = 1972 x 4 x 32 / 256 = 986;  room = 6553.6 - 2462.72 - 1972 - 986 = 1132.88
//   zoomed spans = floor(1132.88 / 32) = 35, Z = 35 x 32 = 1120 tokens per layer and KV head
//   s_b = 2 x 16 x (32 + 128 + 1) x 2 = 10304 bytes; fetch = L hkv 35 s_b = 92,323,840 bytes
static const Phase* find_phase(const std::vector<PhaseResult>& list, std::string_view name) {
  for (const auto& p : list)
    if (p.phase.name == name) return &p.phase;
  return nullptr;
}

TEST(Policies, SekvZoomFillsTheBudgetByDefault) {
  Rig r;
  const PlanResult p = r.plan("sekv", 65536, 1);
  ASSERT_TRUE(p.feasible) << p.reason;
  EXPECT_TRUE(p.notes.empty());
  const Phase* fetch = find_phase(p.decode, "fetch_factors");
  ASSERT_NE(fetch, nullptr);
  EXPECT_DOUBLE_EQ(fetch->work.h2d_bytes, 92323840.0);
  const Phase* sel = find_phase(p.decode, "zoom_select");
  ASSERT_NE(sel, nullptr);
  // each head's gates once and 35 indices written, each span's length and end once per call
  EXPECT_DOUBLE_EQ(sel->work.hbm_bytes, 32.0 * (32 * (4 * 1972 + 4 * 35) + 8 * 1972));
  const Phase* rec = find_phase(p.decode, "reconstruct");
  ASSERT_NE(rec, nullptr);
  EXPECT_DOUBLE_EQ(rec->work.flops, 32.0 * 8 * 2 * 1120 * 16 * 128 * 2);  // U S V^T of K and V, Z = 1120
  const Phase* fine = find_phase(p.decode, "fine_attention");
  ASSERT_NE(fine, nullptr);
  EXPECT_DOUBLE_EQ(fine->work.flops, 32.0 * 32 * 1120 * (4 * 128 + 5) + 32.0 * 32 * 128 * 4);
  // The reconstructed tokens of one layer are resident at the step's peak.
  const MemoryDemand with = r.pol("sekv").memory(r.dep, r.params("sekv"), 65536, 1024);
  const MemoryDemand none = r.pol("sekv").memory(r.dep, r.params("sekv", {{"zoom_rate", 0}}), 65536, 1024);
  EXPECT_DOUBLE_EQ(with.hbm_per_seq - none.hbm_per_seq, 1120.0 * 2 * 8 * 128 * 2);
  // A larger budget zooms more spans: every extra token-equivalent of room goes to reconstruction.
  const PlanResult q = r.plan("sekv", 65536, 1, {{"budget_ratio", 0.2}});
  const double room = 13107.2 - 2462.72 - 1972 - 986;  // 7686.48 -> 240 spans
  EXPECT_DOUBLE_EQ(find_phase(q.decode, "fetch_factors")->work.h2d_bytes, 32.0 * 8 * std::floor(room / 32) * 10304);
}

// zoom_rate >= 0 overrides the default: a fixed fraction of the compressed tokens, capped by the room.
TEST(Policies, SekvZoomRateOverridesAndIsCappedByTheRoom) {
  Rig r;
  // 0.005 x 63073.28 = 315.3664 tokens, 9.8552 spans of 32 (fractional: a mean over steps and heads).
  const PlanResult a = r.plan("sekv", 65536, 1, {{"zoom_rate", 0.005}});
  EXPECT_DOUBLE_EQ(find_phase(a.decode, "fetch_factors")->work.h2d_bytes, 32.0 * 8 * (0.005 * 63073.28 / 32) * 10304);
  EXPECT_TRUE(a.notes.empty());
  // 0.5 asks for 31536.64 tokens; the room is 1132.88 (not floored to whole spans: the rate is a mean).
  const PlanResult b = r.plan("sekv", 65536, 1, {{"zoom_rate", 0.5}});
  EXPECT_NEAR(find_phase(b.decode, "fetch_factors")->work.h2d_bytes, 32.0 * 8 * (1132.88 / 32) * 10304, 1e-3);
  ASSERT_EQ(b.notes.size(), 1u);
  EXPECT_NE(b.notes[0].find("zoom_rate 0.5 asks for 31537"), std::string::npos) << b.notes[0];
  EXPECT_NE(b.notes[0].find("room for 1133: capped"), std::string::npos) << b.notes[0];
  // 0: never zoom (the coarse-only operating point).
  const PlanResult c = r.plan("sekv", 65536, 1, {{"zoom_rate", 0}});
  EXPECT_EQ(find_phase(c.decode, "fetch_factors")->work.h2d_bytes, 0);
  EXPECT_TRUE(c.notes.empty());
}

// When the full-resolution set alone (anchors, short spans, local window) exceeds the budget, nothing
// can be zoomed, and the result says so; likewise when the coarse entries and summaries take the rest,
// or when what is left is less than one span.
TEST(Policies, SekvSaysWhenThereIsNoRoomToZoom) {
  Rig r;
  // P = 4096: F = 512 + 0.03 x 3584 = 619.52 > beta P = 409.6.
  const PlanResult a = r.plan("sekv", 4096, 1);
  ASSERT_TRUE(a.feasible) << a.reason;
  EXPECT_EQ(find_phase(a.decode, "fetch_factors")->work.h2d_bytes, 0);
  ASSERT_EQ(a.notes.size(), 1u);
  EXPECT_NE(a.notes[0].find("no room to zoom: the full-resolution set alone (local window 512 + anchors and short "
                            "spans 108 = 620 tokens) exceeds the GPU-resident budget (budget_ratio 0.1 x 4096 = 410"),
            std::string::npos)
      << a.notes[0];
  // ... and says what follows: nothing is zoomed, and by how much the resident set is over.
  EXPECT_NE(a.notes[0].find("tokens per layer and KV head); every compressed span stays coarse and the resident set is "),
            std::string::npos)
      << a.notes[0];
  // The override cannot zoom either, and gets the same note.
  const PlanResult a2 = r.plan("sekv", 4096, 1, {{"zoom_rate", 0.01}});
  EXPECT_EQ(find_phase(a2.decode, "fetch_factors")->work.h2d_bytes, 0);
  EXPECT_EQ(a2.notes, a.notes);
  // P = 8192: F = 742.4 fits in 819.2, but F + m + summaries = 742.4 + 233 + 116.5 does not.
  const PlanResult b = r.plan("sekv", 8192, 1);
  ASSERT_EQ(b.notes.size(), 1u);
  EXPECT_NE(b.notes[0].find("no room to zoom: the full-resolution set (742 tokens) fits in"), std::string::npos)
      << b.notes[0];
  EXPECT_NE(b.notes[0].find("but not with the coarse entries and routing summaries of its 233 spans"), std::string::npos)
      << b.notes[0];
  // P = 65536, beta = 0.0829: room = 5432.93 - 5420.72 = 12.2, less than one span of 32.
  const PlanResult c = r.plan("sekv", 65536, 1, {{"budget_ratio", 0.0829}});
  EXPECT_EQ(find_phase(c.decode, "fetch_factors")->work.h2d_bytes, 0);
  ASSERT_EQ(c.notes.size(), 1u);
  EXPECT_NE(c.notes[0].find("leaves 12 token-equivalents"), std::string::npos) << c.notes[0];
  EXPECT_NE(c.notes[0].find("less than one span of 32 tokens"), std::string::npos) << c.notes[0];
  // The note is in the table and the JSON.
  const auto t = test::run_kvsim("plan --policy sekv --context 4096 --batch 1 --detail");
  ASSERT_EQ(t.exit_code, 0) << t.out;
  EXPECT_NE(t.out.find("    note: no room to zoom: the full-resolution set alone"), std::string::npos) << t.out;
  const auto j = test::run_kvsim("plan --policy sekv --context 4096,65536 --batch 1 --format json");
  ASSERT_EQ(j.exit_code, 0) << j.out;
  const auto res = nlohmann::json::parse(j.out)["results"];
  ASSERT_EQ(res.size(), 2u);
  ASSERT_EQ(res[0]["notes"].size(), 1u);
  EXPECT_EQ(res[0]["notes"][0].get<std::string>().rfind("no room to zoom", 0), 0u);
  EXPECT_TRUE(res[1]["notes"].is_array());
  EXPECT_TRUE(res[1]["notes"].empty());
}

// Surprisal (§3.1, eq. 1) is the model's own prediction at every prompt position: SEKV's prefill runs the
// LM head over positions 0..P-2 (the shared prefill_lm_head computes position P-1's). By hand at
// P = 65536, chunks of 8192 (8), h 4096, V 128256, bf16: rows = 65535.
TEST(Policies, SekvPrefillCostsTheLmHeadOverThePrompt) {
  Rig r;
  const PlanResult p = r.plan("sekv", 65536, 1);
  const Phase* head = find_phase(p.prefill, "surprisal_lm_head");
  ASSERT_NE(head, nullptr);
  EXPECT_EQ(head->kind, PhaseKind::gemm);
  EXPECT_DOUBLE_EQ(head->work.flops, 2.0 * 65535 * 4096 * 128256);  // 6.8856e13
  // The weights once per chunk, hidden states in, logits out.
  EXPECT_DOUBLE_EQ(head->work.hbm_bytes, 8.0 * 4096 * 128256 * 2 + 65535.0 * (4096 + 128256) * 2);
  EXPECT_EQ(head->work.launches, 8);
  const Phase* sur = find_phase(p.prefill, "surprisal");
  ASSERT_NE(sur, nullptr);
  EXPECT_DOUBLE_EQ(sur->work.flops, 65535.0 * 128256 * 4);
  EXPECT_DOUBLE_EQ(sur->work.hbm_bytes, 65535.0 * (128256 * 2 + 8));  // logits in; token id in, H_t out
  // It is part of TTFT: prefill phases sum to it.
  double ttft = 0;
  for (const auto& ph : p.prefill) ttft += ph.seconds;
  EXPECT_DOUBLE_EQ(ttft, p.ttft_s);
  // The vocabulary splits over tensor-parallel GPUs.
  Deployment tp2 = make_deployment(r.model, r.gpu, r.host, r.cal,
                                   {.tensor_parallel = 2, .weight_dtype = r.model.dtype, .kv_dtype = r.model.dtype});
  const ParamValues v = r.params("sekv");
  PhaseList pre;
  r.pol("sekv").prefill(tp2, v, 65536, pre);
  for (const Phase& ph : pre)
    if (ph.name == "surprisal_lm_head") { EXPECT_DOUBLE_EQ(ph.work.flops, 65535.0 * 4096 * 128256); }
}

// A policy that offloads lets a larger batch fit than full KV on the same GPU.
TEST(Policies, OffloadingFitsALargerBatch) {
  Rig r;
  const int64_t full = r.plan("full", 131072, 0).memory.max_batch;
  EXPECT_GE(full, 1);
  for (const char* name : {"sentencekv", "sekv", "ctkvr"}) {
    const PlanResult p = r.plan(name, 131072, 0);
    ASSERT_TRUE(p.feasible) << name << ": " << p.reason;
    EXPECT_GT(p.memory.max_batch, full) << name;
    EXPECT_GT(p.memory.kv_dram_bytes, 0) << name;
  }
}

// The page-versus-token argument: the same tokens attended as 32-token pages cost less than as
// single tokens, because a gather's efficiency depends on its run length.
TEST(Policies, PagesBeatTokensAtTheSameBudget) {
  Rig r;
  const StepResult pages = r.step("chess", 16, 65536);
  const StepResult tokens = r.step("chess", 16, 65536, {{"page_size", 1}, {"sink_pages", 32}, {"window_pages", 128}});
  const double tp = phase_seconds(pages, {"paged_attention"}), tt = phase_seconds(tokens, {"paged_attention"});
  EXPECT_GT(tt, 1.15 * tp);
  EXPECT_NEAR(r.cal.efficiency(PhaseKind::attention, Ceiling::hbm, 256), 0.8, 1e-12);
  EXPECT_NEAR(r.cal.efficiency(PhaseKind::attention, Ceiling::hbm, 32 * 256), 32 * 256 / (32 * 256 + 64.0), 1e-12);
}

// PCIe duplex: an H2D copy alone runs at its unidirectional rate; beside a D2H copy both drop to the
// measured bidirectional rates.
TEST(Policies, PcieDuplexSlowsH2dUnderD2h) {
  Rig r("llama-3.1-8b", "a100-80g");
  const Machine& m = r.dep.machine;
  EXPECT_DOUBLE_EQ(m.h2d_duplex, 11e9);
  using namespace kvsim::sim;
  const auto cap = capacities(m);
  auto copy = [&](bool h2d, double bytes) {
    Phase p = blocks::copy("c", h2d, 1, bytes, 0, 1);
    p.work.dram_bytes = p.work.hbm_bytes = 0;
    p.work.launches = 0;
    return to_sim_phase(p, m);
  };
  StepGraph alone(cap.size());
  alone.add_phase(copy(true, 1e9));
  EXPECT_NEAR(alone.run(cap, couplings(m)).makespan, 1e9 / m.h2d, 1e-12);
  StepGraph both(cap.size());
  const size_t up = both.add_phase(copy(true, 1e9));
  both.add_phase(copy(false, 10e9));
  const auto t = both.run(cap, couplings(m));
  EXPECT_NEAR(t.finish[up], 1e9 / 11e9, 1e-9);
  // Without the coupling the two directions would not interact.
  EXPECT_NEAR(both.run(cap).finish[up], 1e9 / m.h2d, 1e-12);
}

// The decode graph: a single-stream policy is not simulated (its time is the exact sum), and a
// simulated one with nothing to overlap reproduces the sum.
TEST(Policies, DecodeGraphMatchesSumWithoutOverlap) {
  Rig r;
  const StepResult f = r.step("full", 4, 16384);
  EXPECT_FALSE(f.simulated);
  EXPECT_DOUBLE_EQ(f.seconds, f.serial_seconds);
  PhaseList pol, dense;
  decode_phase_lists(r.dep, r.pol("full"), {}, StepShape{4, 16384, 0}, pol, dense);
  const auto g = sim::build_decode_graph(pol, dense, r.model.layers, r.dep.machine);
  EXPECT_EQ(g.graph.size(), size_t(r.model.layers) * (dense.size() - 1 + pol.size()) + 1);
  EXPECT_NEAR(g.graph.run(sim::capacities(r.dep.machine)).makespan, f.seconds, 1e-9 * f.seconds);
  // Every policy's simulated step is no longer than its phases in series and no shorter than its
  // longest phase.
  for (const Policy* p : all_policies()) {
    SCOPED_TRACE(std::string(p->name()));
    const StepResult s = decode_step(r.dep, *p, p->defaults(), StepShape{8, 65536, 512});
    double longest = 0;
    for (const auto& ph : s.phases) longest = std::max(longest, ph.seconds);
    EXPECT_LE(s.seconds, s.serial_seconds * (1 + 1e-9));
    EXPECT_GE(s.seconds, longest * (1 - 1e-9));
  }
}

// Choice parameters are written as words in scenarios and on the command line.
TEST(Policies, ChoiceParametersInScenariosAndSet) {
  auto r = test::run_kvsim("plan --policy sentencekv --policy ctkvr --context 32768 --batch 2 --format json "
                           "--set sentencekv.reselect=per_sentence --set ctkvr.rerank_on=gpu");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["results"][0]["params"]["reselect"], "per_sentence");
  EXPECT_EQ(j["results"][1]["params"]["rerank_on"], "gpu");
  EXPECT_TRUE(j["results"][0]["vs_full"]["throughput"].is_number());
  EXPECT_GT(j["results"][0]["vs_full"]["kv_hbm_per_seq"].get<double>(), 0);
  r = test::run_kvsim("plan --policy sentencekv --set sentencekv.reselect=sometimes");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.out.find("per_step"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("sometimes"), std::string::npos) << r.out;
}

// The default plan compares every policy side by side with speedup and memory against full KV.
TEST(Policies, PlanTableComparesAgainstFull) {
  const auto r = test::run_kvsim("plan --context 32768 --detail");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  for (const char* name : {"full", "streaming", "snapkv", "quest", "chess", "sentencekv", "chunkkv", "sekv", "ctkvr"})
    EXPECT_NE(r.out.find(std::string("\n  ") + name + " "), std::string::npos) << name;
  EXPECT_NE(r.out.find("xput/full"), std::string::npos);
  EXPECT_NE(r.out.find("overlap hides"), std::string::npos);
}

// Tensor-parallel GPUs share one host: each gets 1/tp of its DRAM capacity, DRAM bandwidth and CPU
// FLOP/s, so CTKVR's host phases slow down and the DRAM-limited batch shrinks as tp grows.
TEST(Policies, TensorParallelGpusShareTheHost) {
  Rig r;
  const Deployment tp2 = make_deployment(r.model, r.gpu, r.host, r.cal, {.tensor_parallel = 2, .weight_dtype = r.model.dtype, .kv_dtype = r.model.dtype});
  EXPECT_DOUBLE_EQ(tp2.machine.dram, r.dep.machine.dram / 2);
  EXPECT_DOUBLE_EQ(tp2.machine.host_compute, r.dep.machine.host_compute / 2);
  EXPECT_DOUBLE_EQ(tp2.machine.hbm, r.dep.machine.hbm);  // each GPU keeps its own HBM and PCIe link
  EXPECT_DOUBLE_EQ(tp2.machine.h2d, r.dep.machine.h2d);
  const ParamValues v = r.params("ctkvr");
  const PlanResult one = evaluate(DesignPoint{&r.dep, &r.pol("ctkvr"), &v, 131072, 1024, 0});
  const PlanResult two = evaluate(DesignPoint{&tp2, &r.pol("ctkvr"), &v, 131072, 1024, 0});
  EXPECT_DOUBLE_EQ(two.memory.dram_usable, one.memory.dram_usable / 2);
  // Per GPU, tp 2 halves the heads but also the host's share: CPU phases take as long as at tp 1.
  const StepResult s1 = decode_step(r.dep, r.pol("ctkvr"), v, StepShape{8, 131072, 0});
  const StepResult s2 = decode_step(tp2, r.pol("ctkvr"), v, StepShape{8, 131072, 0});
  EXPECT_NEAR(phase_seconds(s2, {"cpu_rerank"}), phase_seconds(s1, {"cpu_rerank"}), 1e-3 * phase_seconds(s1, {"cpu_rerank"}));
}
