// Pinned costs (issue 18, item 7): every phase of every policy, of the dense transformer, at ONE shape,
// against a hand calculation written out as arithmetic on the shape's numbers. A changed factor, a
// floor for a ceil or a sum for a max in a cost formula changes one of these numbers, and the test
// names the phase and the field. The formulas and their sections are in docs/cost-model.md
// (§ Decode phases, § Prefill phases, § Policies > Building blocks and one subsection per policy);
// the seed paper section each comes from is named in a comment next to each check.
//
// The shape (chosen so that every ceil/floor/round in the formulas sees a non-integer):
//   model   L = 3 layers, h = 64 hidden, hq = 4 query heads, hkv = 2 KV heads (g = 2), d = 16,
//           f = 128 FFN, V = 1000 vocabulary, bf16 everywhere (b_w = b_kv = b_a = 2), tp = 1
//           => key row k_r = d b_kv = 32 B, R = 2 hkv d b_kv = 128 B, KV_tok = L R = 384 B
//   step    B = 3 sequences, n_p = 1000 prompt tokens, n_g = 20 generated => n = 1020 cached
//   memory  n_o = 48 output tokens (n_p + n_o = 1048)
//   prefill chunk 256 tokens (4 chunks, the last partial)
// The GPU and host are the library's h100-sxm and its default host; they do not enter any pinned
// amount (the work of a phase does not depend on the machine), only the simulator tests' timings.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "kernels/reference/reference.hpp"
#include "model/decode_graph.hpp"
#include "model/plan.hpp"
#include "model/resources.hpp"
#include "model/transformer.hpp"
#include "policies/registry.hpp"
#include "sim/fair_share.hpp"
#include "sim/step_graph.hpp"
#include "test_util.hpp"

using namespace kvsim;

namespace {

// ---- the shape, as numbers ----
constexpr double L = 3, h = 64, hq = 4, hkv = 2, g = 2, hd = 16, f = 128, V = 1000;
constexpr double bw = 2, bkv = 2, ba = 2;
constexpr double kr = hd * bkv;            // 32
constexpr double R = 2 * hkv * hd * bkv;   // 128
constexpr double KVt = L * R;              // 384
constexpr double B = 3, np_ = 1000, ng = 20, n = np_ + ng, no = 48;

ModelConfig small_model() {
  ModelConfig m;
  m.name = "pinned-small";
  m.family = "llama";
  m.layers = int(L);
  m.hidden = int(h);
  m.query_heads = int(hq);
  m.kv_heads = int(hkv);
  m.head_dim = int(hd);
  m.ffn_hidden = int(f);
  m.vocab = int(V);
  m.rope_theta = 10000;
  m.max_context = 1 << 20;
  m.dtype = DType::bf16;
  return m;
}

struct Rig {
  ModelConfig model = small_model();
  GpuSpec gpu = test::gpu("h100-sxm");
  HostSpec host = test::host(gpu.default_host);
  Calibration cal;
  Deployment dep;
  explicit Rig(int tp = 1) {
    dep = make_deployment(model, gpu, host, cal, {.tensor_parallel = tp, .prefill_chunk_tokens = 256});
  }
  static ParamValues params(const Policy& p, const std::map<std::string, double>& set) {
    ParamValues v = p.defaults();
    for (const auto& [k, x] : set) {
      const int i = p.param_index(k);
      EXPECT_GE(i, 0) << p.name() << "." << k;
      if (i >= 0) v[size_t(i)] = x;
    }
    return v;
  }
};

struct Expect {
  double flops = 0, hbm = 0, dram = 0, h2d = 0, d2h = 0, link = 0, launches = 0;
};

// Checks one phase's work against the hand calculation; relative tolerance 1e-12 (the formulas are
// the same arithmetic in another order).
void expect_work(const Phase& p, const Expect& e) {
  SCOPED_TRACE(std::string("phase ") + std::string(p.name));
  auto near = [](double got, double want, const char* what) {
    EXPECT_NEAR(got, want, 1e-12 * std::max(1.0, std::fabs(want))) << what;
  };
  near(p.work.flops, e.flops, "flops");
  near(p.work.hbm_bytes, e.hbm, "hbm_bytes");
  near(p.work.dram_bytes, e.dram, "dram_bytes");
  near(p.work.h2d_bytes, e.h2d, "h2d_bytes");
  near(p.work.d2h_bytes, e.d2h, "d2h_bytes");
  near(p.work.link_bytes, e.link, "link_bytes");
  near(p.work.launches, e.launches, "launches");
}

void expect_memory(const MemoryDemand& m, const MemoryDemand& e) {
  auto near = [](double got, double want, const char* what) {
    EXPECT_NEAR(got, want, 1e-12 * std::max(1.0, std::fabs(want))) << what;
  };
  near(m.hbm_per_seq, e.hbm_per_seq, "hbm_per_seq");
  near(m.hbm_fixed, e.hbm_fixed, "hbm_fixed");
  near(m.dram_per_seq, e.dram_per_seq, "dram_per_seq");
  near(m.dram_fixed, e.dram_fixed, "dram_fixed");
  near(m.kv_hbm_per_seq, e.kv_hbm_per_seq, "kv_hbm_per_seq");
  near(m.kv_dram_per_seq, e.kv_dram_per_seq, "kv_dram_per_seq");
}

std::vector<std::string> names(const PhaseList& l) {
  std::vector<std::string> v;
  for (const Phase& p : l) v.emplace_back(p.name);
  return v;
}

// Hand formulas of the building blocks (docs/cost-model.md § Building blocks), used only where a
// policy's phase IS the block; every argument is written out at the call.
// attn(T, append): L B hq T (4 d + 5) FLOPs; HBM L B (T R + 2 hq d b_a + [append] R); L (append ? 2 : 1).
Expect attn(double T, bool append) {
  return {L * B * hq * T * (4 * hd + 5), L * B * (T * R + 2 * hq * hd * ba + (append ? R : 0)), 0, 0, 0, 0,
          L * (append ? 2 : 1)};
}

PhaseList decode(const Rig& r, const std::string& pol, const std::map<std::string, double>& set,
                 double prompt = np_, double generated = ng) {
  const Policy& p = *find_policy(pol);
  PhaseList out;
  p.decode_attention(r.dep, Rig::params(p, set), StepShape{B, prompt, generated}, out);
  return out;
}
PhaseList prefill(const Rig& r, const std::string& pol, const std::map<std::string, double>& set) {
  const Policy& p = *find_policy(pol);
  PhaseList out;
  p.prefill(r.dep, Rig::params(p, set), np_, out);
  return out;
}
MemoryDemand memory(const Rig& r, const std::string& pol, const std::map<std::string, double>& set) {
  const Policy& p = *find_policy(pol);
  return p.memory(r.dep, Rig::params(p, set), np_, no);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// The deployment's derived sizes (docs/cost-model.md § Symbols, § Memory).
TEST(PinnedCosts, DeploymentShapes) {
  Rig r;
  EXPECT_EQ(r.dep.hq, hq);
  EXPECT_EQ(r.dep.hkv, hkv);
  EXPECT_EQ(r.dep.hkv_cached, hkv);
  EXPECT_DOUBLE_EQ(r.dep.kv_bytes_per_token(), KVt);
  EXPECT_DOUBLE_EQ(r.dep.decode_cache_bytes(100, true), 100 * R);
  EXPECT_DOUBLE_EQ(r.dep.prefill_chunk(1000), 256);
  EXPECT_DOUBLE_EQ(r.dep.prefill_chunk(100), 100);
  // weights: L (attention h hq d + 2 h hkv d + hq d h, MLP 3 h f) + embedding and LM head 2 V h + norms
  // (2 h L + h), all at b_w.
  const double attn_w = h * hq * hd + 2 * h * hkv * hd + hq * hd * h;
  EXPECT_DOUBLE_EQ(r.dep.weight_bytes(), (L * (attn_w + 3 * h * f) + 2 * V * h + 2 * h * L + h) * bw);
  // tp = 2 splits heads, FFN and vocabulary; tp = 4 leaves hkv = 2/4 -> replicated, one per GPU.
  Rig r2(2);
  EXPECT_EQ(r2.dep.hq, 2);
  EXPECT_EQ(r2.dep.hkv, 1);
  EXPECT_EQ(r2.dep.ffn, 64);
  EXPECT_EQ(r2.dep.vocab, 500);
  Rig r4(4);
  EXPECT_EQ(r4.dep.hq, 1);
  EXPECT_EQ(r4.dep.hkv, 1);
  // GQA expanded (attention_repeat_kv): read, write expanded, read expanded = 1 + 2 g passes; a
  // concatenating append adds 2 (docs/cost-model.md § Memory, implementation profiles).
  Deployment d = r.dep;
  d.attention_repeat_kv = true;
  EXPECT_DOUBLE_EQ(d.decode_cache_bytes(100, false), (1 + 2 * g) * 100 * R);
  d.kv_append_concat = true;
  EXPECT_DOUBLE_EQ(d.decode_cache_bytes(100, true), (1 + 2 * g + 2) * 100 * R);
  EXPECT_DOUBLE_EQ(d.decode_cache_bytes(100, false), (1 + 2 * g) * 100 * R);
}

// docs/cost-model.md § Decode phases (model/transformer.cpp add_decode_dense_phases).
TEST(PinnedCosts, DenseDecodePhases) {
  Rig r;
  PhaseList l;
  add_decode_dense_phases(r.dep, B, l);
  ASSERT_EQ(names(l), (std::vector<std::string>{"qkv_proj", "o_proj", "mlp", "norm", "lm_head"}));
  const double q = (hq + 2 * hkv) * hd;  // 128
  expect_work(l[0], {L * 2 * B * h * q, L * (h * q * bw + B * (h + q) * ba), 0, 0, 0, 0, L});
  expect_work(l[1], {L * 2 * B * hq * hd * h, L * (hq * hd * h * bw + B * (hq * hd + h) * ba), 0, 0, 0, 0, L});
  expect_work(l[2], {L * B * (6 * h * f + 4 * f), L * (3 * h * f * bw + B * (2 * h + 6 * f) * ba), 0, 0, 0, 0, 3 * L});
  expect_work(l[3], {10 * L * B * h, 8 * L * B * h * ba, 0, 0, 0, 0, 2 * L});
  expect_work(l[4], {2 * B * h * V, h * V * bw + B * (h + V) * ba + B * h * bw + 4 * B * V, 0, 0, 0, 0, 4});
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(l[i].repeat, L) << l[i].name;
  EXPECT_EQ(l[4].repeat, 1);
  // tp = 2: per-GPU heads (2, 1), f/tp = 64, V/tp = 500, and the all-reduce.
  Rig r2(2);
  PhaseList l2;
  add_decode_dense_phases(r2.dep, B, l2);
  ASSERT_EQ(l2.size(), 6u);
  EXPECT_EQ(l2[5].name, "allreduce");
  const double tp = 2;
  expect_work(l2[5], {2 * L * B * h * (tp - 1) / tp, 6 * L * B * h * ba, 0, 0, 0, 4 * L * B * h * ba * (tp - 1) / tp, 2 * L});
  expect_work(l2[0], {L * 2 * B * h * (2 + 2) * hd, L * (h * 4 * hd * bw + B * (h + 4 * hd) * ba), 0, 0, 0, 0, L});
  expect_work(l2[4], {2 * B * h * 500, h * 500 * bw + B * (h + 500) * ba + B * h * bw + 4 * B * 500, 0, 0, 0, 0, 4});
}

// docs/cost-model.md § Decode phases, `attention` row; § full.
TEST(PinnedCosts, FullPolicy) {
  Rig r;
  const PhaseList d = decode(r, "full", {});
  ASSERT_EQ(names(d), std::vector<std::string>{"attention"});
  expect_work(d[0], attn(n, true));  // L B hq n (4d+5); L B (n R + R + 2 hq d b_a); 2 L
  EXPECT_EQ(d[0].repeat, L);
  EXPECT_TRUE(prefill(r, "full", {}).empty());
  expect_memory(memory(r, "full", {}), {(np_ + no) * KVt, 0, 0, 0, (np_ + no) * KVt, 0});
}

// docs/cost-model.md § Prefill phases (model/transformer.cpp add_prefill_phases): n = 1000 in chunks of
// c = 256: k = ceil(1000/256) = 4 chunks.
TEST(PinnedCosts, DensePrefillPhases) {
  Rig r;
  PhaseList l;
  add_prefill_phases(r.dep, np_, l);
  ASSERT_EQ(names(l), (std::vector<std::string>{"prefill_gemm", "prefill_attention", "prefill_norm", "prefill_lm_head"}));
  const double k = 4, W = h * (hq + 2 * hkv) * hd + hq * hd * h + 3 * h * f;
  expect_work(l[0], {L * (2 * np_ * W + 4 * np_ * f),
                     L * (k * W * bw + np_ * (2 * h + (hq + 2 * hkv) * hd + hq * hd + 5 * f) * ba), 0, 0, 0, 0,
                     5 * k * L});
  const double S = 1000.0 * 1001 / 2, reads = 256 * k * (k + 1) / 2;  // 500500 scores, 2560 KV token reads
  expect_work(l[1], {L * hq * S * (4 * hd + 5), L * (np_ * R + reads * R + 2 * np_ * hq * hd * ba), 0, 0, 0, 0, 2 * k * L});
  expect_work(l[2], {10 * L * np_ * h, 8 * L * np_ * h * ba, 0, 0, 0, 0, 2 * k * L});
  expect_work(l[3], {2 * h * V, h * V * bw + (h + V) * ba, 0, 0, 0, 0, 2});
  // A short prompt: one chunk of 3 tokens, 6 scores per head.
  PhaseList s;
  add_prefill_phases(r.dep, 3, s);
  expect_work(s[1], {L * hq * 6 * (4 * hd + 5), L * (3 * R + 3 * R + 2 * 3 * hq * hd * ba), 0, 0, 0, 0, 2 * L});
  // tp = 2: the prefill all-reduce of an n x h buffer.
  Rig r2(2);
  PhaseList l2;
  add_prefill_phases(r2.dep, np_, l2);
  ASSERT_EQ(l2.size(), 5u);
  expect_work(l2[4], {2 * L * np_ * h / 2, 6 * L * np_ * h * ba, 0, 0, 0, 4 * L * np_ * h * ba / 2, 2 * k * L});
}

// docs/cost-model.md § Prefill phases (issue 27 item 3): the published GEMM curves are e(x) with x the
// bytes of ONE matrix product, so prefill_gemm's instance is one of a layer's four weight GEMMs on one
// chunk: repeat L x k x 4 and x = the phase's bytes / (L k 4), their mean. It was the whole prefill
// (repeat 1: L k weight reads and every activation, 9.8e11 B for Llama-3.1-8B at 128K), past every
// measurement. prefill_lm_head stays one GEMM of one row.
TEST(PinnedCosts, PrefillGemmInstanceIsOneGemm) {
  Rig r;
  PhaseList l;
  add_prefill_phases(r.dep, np_, l);
  const double k = 4, W = h * (hq + 2 * hkv) * hd + hq * hd * h + 3 * h * f;
  const double total = L * (k * W * bw + np_ * (2 * h + (hq + 2 * hkv) * hd + hq * hd + 5 * f) * ba);
  ASSERT_EQ(l[0].name, "prefill_gemm");
  EXPECT_EQ(l[0].repeat, L * k * 4);
  EXPECT_DOUBLE_EQ(phase_bytes_on(l[0], Ceiling::hbm), total / (L * k * 4));
  EXPECT_DOUBLE_EQ(phase_bytes_on(l[0], Ceiling::tensor), total / (L * k * 4));
  // One GEMM's bytes lie between the smallest and the largest of the four (o_proj and gate+up here).
  const double c = 256, o_proj = hq * hd * h * bw + c * (hq * hd + h) * ba, gate_up = h * 2 * f * bw + c * (h + 2 * f) * ba;
  EXPECT_GT(phase_bytes_on(l[0], Ceiling::hbm), o_proj);
  EXPECT_LT(phase_bytes_on(l[0], Ceiling::hbm), gate_up);
  ASSERT_EQ(l[3].name, "prefill_lm_head");
  EXPECT_EQ(l[3].repeat, 1);
  EXPECT_DOUBLE_EQ(phase_bytes_on(l[3], Ceiling::hbm), h * V * bw + (h + V) * ba);
}

// docs/cost-model.md § streaming: K(x) = min(x, sinks + window), sinks 4 + window 60 = 64.
TEST(PinnedCosts, Streaming) {
  Rig r;
  const std::map<std::string, double> p = {{"sinks", 4}, {"window", 60}};
  const PhaseList d = decode(r, "streaming", p);
  ASSERT_EQ(names(d), std::vector<std::string>{"attention"});
  expect_work(d[0], attn(64, true));
  const PhaseList pre = prefill(r, "streaming", p);
  ASSERT_EQ(names(pre), std::vector<std::string>{"evict_compact"});
  expect_work(pre[0], {0, 2 * L * 64 * R, 0, 0, 0, 0, L});
  EXPECT_EQ(pre[0].run_bytes, 60 * kr);
  expect_memory(memory(r, "streaming", p), {64 * KVt, np_ * R, 0, 0, 64 * KVt, 0});
  // A prompt shorter than the window: the generated tokens fill it up to K(n_p + n_o) at peak.
  const MemoryDemand sm = find_policy("streaming")->memory(r.dep, Rig::params(*find_policy("streaming"), p), 30, no);
  expect_memory(sm, {64 * KVt, 30 * R, 0, 0, 64 * KVt, 0});  // K(30 + 48) = 64, not K(30) = 30
  const MemoryDemand sm2 = find_policy("streaming")->memory(r.dep, Rig::params(*find_policy("streaming"), p), 10, 20);
  expect_memory(sm2, {30 * KVt, 10 * R, 0, 0, 30 * KVt, 0});
}

// docs/cost-model.md § snapkv: kept = min(n_p, budget_tokens) = 200.
TEST(PinnedCosts, SnapKv) {
  Rig r;
  const std::map<std::string, double> p = {{"budget_tokens", 200}, {"obs_window", 16}, {"pool_kernel", 5}};
  const PhaseList d = decode(r, "snapkv", p);
  ASSERT_EQ(names(d), std::vector<std::string>{"attention"});
  expect_work(d[0], attn(200 + ng, true));
  const PhaseList pre = prefill(r, "snapkv", p);
  ASSERT_EQ(names(pre), (std::vector<std::string>{"window_scores", "pool_topk", "compact"}));
  // window_scores(n_p, w = 16, L)
  expect_work(pre[0], {L * hq * 16 * np_ * (2 * hd + 5), L * (hkv * np_ * kr + hq * 16 * hd * ba + 8 * hq * np_), 0, 0, 0, 0, 2 * L});
  // pooling + top-k per KV head: (pool_kernel + g + 4) FLOPs and 12 B per score
  expect_work(pre[1], {L * hkv * np_ * (5 + g + 4), L * hkv * np_ * 12, 0, 0, 0, 0, L});  // one top-k call per layer
  expect_work(pre[2], {0, 2 * L * 200 * R, 0, 0, 0, 0, L});
  EXPECT_EQ(pre[2].run_bytes, kr);
  expect_memory(memory(r, "snapkv", p), {(200 + no) * KVt, np_ * R, 0, 0, (200 + no) * KVt, 0});
}

// docs/cost-model.md § quest: pages P = ceil(n / page_size); chosen = min(P, ceil(budget / page)).
TEST(PinnedCosts, Quest) {
  Rig r;
  const std::map<std::string, double> p = {{"page_size", 16}, {"budget_tokens", 250}};
  const PhaseList d = decode(r, "quest", p);
  ASSERT_EQ(names(d), (std::vector<std::string>{"page_bound", "topk_pages", "sparse_attention"}));
  const double P = 64;       // ceil(1020 / 16) = ceil(63.75)
  const double chosen = 16;  // ceil(250 / 16) = ceil(15.6)
  // score(hq, hkv, P, 2d, b_kv): min and max key per page
  expect_work(d[0], {L * B * hq * P * (2 * 2 * hd + 2), L * B * (hkv * P * 2 * hd * bkv + 4 * hq * P + hq * 2 * hd * ba), 0, 0, 0, 0, L});
  expect_work(d[1], {4 * L * B * hq * P, L * B * hq * (4 * P + 4 * chosen), 0, 0, 0, 0, L});
  expect_work(d[2], attn(chosen * 16, true));
  EXPECT_EQ(d[2].run_bytes, 16 * kr);
  const PhaseList pre = prefill(r, "quest", p);
  ASSERT_EQ(names(pre), std::vector<std::string>{"page_minmax"});
  // ceil(1000 / 16) = 63 pages
  expect_work(pre[0], {L * hkv * np_ * hd * 2, L * hkv * (np_ * kr + 63 * 2 * kr), 0, 0, 0, 0, L});
  // ceil(1048 / 16) = 66 pages of min and max keys
  expect_memory(memory(r, "quest", p), {(np_ + no) * KVt + 66 * L * hkv * 2 * kr, 0, 0, 0, (np_ + no) * KVt, 0});
  // A budget beyond the cache: attention over the whole cache (min(n, chosen page)).
  const PhaseList big = decode(r, "quest", {{"page_size", 16}, {"budget_tokens", 4000}});
  expect_work(big[2], attn(n, true));
}

// docs/cost-model.md § chess (seed 000: §3.1 eq. 1-2 vectors, §3.2 Algorithm 1 selection, §3.3 and
// App. C reselection every reselect_pages pages, §4.3 paged attention).
TEST(PinnedCosts, Chess) {
  Rig r;
  const std::map<std::string, double> p = {{"page_size", 16},  {"chunk_pages", 3}, {"grid_chunks", 4},
                                           {"rho_grid", 0.5},  {"rho_chunk", 0.5}, {"rho_page", 0.5},
                                           {"sink_pages", 1},  {"window_pages", 2}, {"reselect_pages", 10}};
  const double D = L * hkv * hd;  // 96: one flattened page vector
  // n = 1020: 64 pages, ceil(64/3) = 22 chunks, ceil(22/4) = 6 grids -> 92 vectors.
  const double Vn = 64 + 22 + 6;  // 64 pages
  // working set: ceil(0.125 n / 16) 16 + (1 + 2) 16 = ceil(7.97) 16 + 48 = 176 tokens
  const double sel = 8 * 16 + 48;
  const double every = 1.0 / (10 * 16);
  const PhaseList d = decode(r, "chess", p);
  ASSERT_EQ(names(d), (std::vector<std::string>{"uncertainty", "select_gemv", "hier_mask", "page_vector", "paged_attention"}));
  expect_work(d[0], {B * V * 6, B * V * 4, 0, 0, 0, 0, 1});
  expect_work(d[1], {every * B * (Vn * D * 2 + 2 * D), every * B * (Vn + 2) * D * bkv, 0, 0, 0, 0, every * 2});
  // each vector's score once, the kept pages' ids (sel / 16 = 11 pages: docs/validation/phase-bytes.md rule 2)
  expect_work(d[2], {every * B * Vn * 8, every * B * (Vn * 4 + sel / 16 * 4), 0, 0, 0, 0, every * 3});  // three top-k calls (kernel_model.hpp)
  expect_work(d[3], {B * D * 3, B * (16 * D * bkv + 3 * D * bkv) / 16, 0, 0, 0, 0, 1});
  expect_work(d[4], attn(sel, true));
  EXPECT_EQ(d[4].run_bytes, 16 * kr);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(d[i].repeat, 1) << d[i].name;  // once per step
  // prefill, n_p = 1000: 63 pages, 21 chunks, ceil(21/4) = 6 grids -> 90 vectors
  const PhaseList pre = prefill(r, "chess", p);
  ASSERT_EQ(names(pre), std::vector<std::string>{"hierarchy_build"});
  expect_work(pre[0], {L * hkv * np_ * hd + 90 * D, L * hkv * np_ * kr + 2 * 90 * D * bkv, 0, 0, 0, 0, L + 2});
  // memory at 1048 tokens: 66 pages, 22 chunks, 6 grids = 94 vectors; working set ceil(131/16) = 9
  // pages + 3 = 12 pages of int32 ids.
  expect_memory(memory(r, "chess", p), {(np_ + no) * KVt + 94 * D * bkv + 12 * 4, 0, 0, 0, (np_ + no) * KVt, 0});
}

// docs/cost-model.md § sentencekv (seed 001: §4.1 / App. A.2 Algorithm 1 prefill, §A.7 global top
// floor(r tau), eq. 1 sentence means, §4.2 / eq. 2-3 decode; §4.1 "Memory management" and Algorithm 1
// lines 7 and 18 for kept_kv_on: cpu, the public code for gpu).
TEST(PinnedCosts, SentenceKv) {
  Rig r;
  std::map<std::string, double> p = {{"token_budget", 101}, {"keep_factor", 2.5}, {"obs_window", 16}, {"sinks", 4},
                                     {"recent", 32},        {"mean_sentence_tokens", 24}, {"reselect", 0}};
  // § sentencekv, "tau counts the sinks and recent tokens" (§4.1: tau is all the GPU holds at decode):
  const double a = 36;    // min(n_p, sinks + recent) = min(1000, 4 + 32)
  const double c = 216;   // max(0, min(n_p, floor(2.5 * 101) = floor(252.5)) - a) = 252 - 36
  const double tr = 65;   // tau' = min(max(0, tau - a), c) = min(101 - 36, 216)
  // § sentencekv, "Sentence vectors only for sentences with kept tokens" (eq. 1, §A.7): the expected
  // occupied sentences when c kept tokens fall uniformly over n' = n_p - a = 964 candidates cut into
  // sentences of 24: S = (n'/24)(1 - (1 - c/n')^24) = 40.17 (1 - 0.0023) = 40.08, between c/24 = 9 and c.
  const double S = 964.0 / 24 * (1 - std::pow(1 - 216.0 / 964, 24));
  ASSERT_GT(S, 40.0);
  ASSERT_LT(S, 40.2);
  const double run = 216 / S;  // t_run = clamp(c/S, 1, 24) = 5.39 kept tokens per sentence bucket
  // ---- kept_kv_on: cpu (default; §4.1 "offload them to CPU memory", Algorithm 1 line 18) ----
  const PhaseList d = decode(r, "sentencekv", p);
  ASSERT_EQ(names(d), (std::vector<std::string>{"sentence_score", "sentence_select", "load_kv", "attention"}));
  // score(hq, hkv, S, d, b_kv) + the running mean query 2 L B hq d (eq. 2)
  expect_work(d[0], {L * B * hq * S * (2 * hd + 2) + 2 * L * B * hq * hd, L * B * (hkv * S * hd * bkv + 4 * hq * S + hq * hd * ba), 0, 0, 0, 0, L});
  expect_work(d[1], {4 * L * B * hkv * S, L * B * hkv * (4 * S + 4 * S), 0, 0, 0, 0, L});  // select(hkv, S, S)
  // copy_h2d(tau' R): H2D = DRAM = HBM
  expect_work(d[2], {0, L * B * tr * R, L * B * tr * R, L * B * tr * R, 0, 0, L});
  EXPECT_DOUBLE_EQ(d[2].run_bytes, run * kr);
  EXPECT_EQ(d[2].stream, Stream::h2d);
  EXPECT_EQ(d[2].after[0], 1);
  // eq. 3: T = a + tau' + n_g = 36 + 65 + 20 = 121 (= tau + n_g: the sinks and recent are inside tau)
  expect_work(d[3], attn(a + tr + ng, true));
  EXPECT_EQ(d[3].after[0], 2);
  // per_sentence (§4.2 prose): the selection and the copy once per 24 generated tokens (e = 1/24); the
  // running mean every step.
  p["reselect"] = 1;
  const double e = 1.0 / 24;
  const PhaseList ds = decode(r, "sentencekv", p);
  expect_work(ds[0], {e * L * B * hq * S * (2 * hd + 2) + 2 * L * B * hq * hd, e * L * B * (hkv * S * hd * bkv + 4 * hq * S + hq * hd * ba), 0, 0, 0, 0, e * L});
  expect_work(ds[1], {e * 4 * L * B * hkv * S, e * L * B * hkv * 8 * S, 0, 0, 0, 0, e * L});
  expect_work(ds[2], {0, e * L * B * tr * R, e * L * B * tr * R, e * L * B * tr * R, 0, 0, e * L});
  expect_work(ds[3], attn(a + tr + ng, true));
  p["reselect"] = 0;
  const PhaseList pre = prefill(r, "sentencekv", p);
  ASSERT_EQ(names(pre), (std::vector<std::string>{"window_scores", "topk_tokens", "sentence_means", "pack_kept", "offload"}));
  expect_work(pre[0], {L * hq * 16 * np_ * (2 * hd + 5), L * (hkv * np_ * kr + hq * 16 * hd * ba + 8 * hq * np_), 0, 0, 0, 0, 2 * L});
  expect_work(pre[1], {4 * L * np_, L * (4 * np_ + 4 * c), 0, 0, 0, 0, L});  // select(1, n_p, c): global top (§A.7)
  expect_work(pre[2], {L * hkv * c * hd, L * hkv * (c + S) * kr, 0, 0, 0, 0, L});
  expect_work(pre[3], {0, 2 * L * c * R, 0, 0, 0, 0, L});  // gather(c R): the retrievable tokens only
  EXPECT_EQ(pre[3].run_bytes, kr);
  expect_work(pre[4], {0, L * c * R, L * c * R, 0, L * c * R, 0, L});  // copy_d2h(c R), Algorithm 1 line 7
  EXPECT_EQ(pre[4].stream, Stream::d2h);
  // § sentencekv Memory, cpu: HBM KV (a + tau' + n_o) KV_tok (sinks, recent, the staging buffer of the
  // retrieved tokens, generated tokens), + the sentence vectors S L hkv k_r; DRAM c KV_tok; fixed n_p R.
  expect_memory(memory(r, "sentencekv", p),
                {(a + tr + no) * KVt + S * L * hkv * kr, np_ * R, c * KVt, 0, (a + tr + no) * KVt, c * KVt});
  // ---- kept_kv_on: gpu (the public code: kept KV in HBM, dense attention masked to the selection) ----
  p["kept_kv_on"] = 1;
  const PhaseList dg = decode(r, "sentencekv", p);
  ASSERT_EQ(names(dg), (std::vector<std::string>{"sentence_score", "sentence_select", "sentence_mask", "attention"}));
  expect_work(dg[0], {L * B * hq * S * (2 * hd + 2) + 2 * L * B * hq * hd, L * B * (hkv * S * hd * bkv + 4 * hq * S + hq * hd * ba), 0, 0, 0, 0, L});
  expect_work(dg[1], {4 * L * B * hkv * S, 8 * L * B * hkv * S, 0, 0, 0, 0, L});
  // T = a + c + n_g = 36 + 216 + 20 = 272: every kept token is attended; the mask is one byte per KV
  // head and cached token.
  const double Tg = a + c + ng;
  expect_work(dg[2], {0, L * B * hkv * Tg, 0, 0, 0, 0, L});
  EXPECT_EQ(dg[2].kind, PhaseKind::select);
  EXPECT_EQ(dg[2].stream, Stream::gpu);
  EXPECT_EQ(dg[2].after[0], 1);
  Expect dense = attn(Tg, true);
  dense.hbm += L * B * hkv * Tg;  // attention reads the mask
  expect_work(dg[3], dense);
  EXPECT_EQ(dg[3].after[0], 2);
  for (const Phase& ph : dg) {  // nothing over PCIe
    EXPECT_EQ(ph.work.h2d_bytes, 0) << ph.name;
    EXPECT_EQ(ph.work.d2h_bytes, 0) << ph.name;
    EXPECT_EQ(ph.work.dram_bytes, 0) << ph.name;
    EXPECT_EQ(ph.stream, Stream::gpu) << ph.name;
  }
  // per_sentence scales the mask as it scales the copy.
  p["reselect"] = 1;
  const PhaseList dgs = decode(r, "sentencekv", p);
  expect_work(dgs[2], {0, e * L * B * hkv * Tg, 0, 0, 0, 0, e * L});
  expect_work(dgs[3], dense);
  p["reselect"] = 0;
  // Prefill: no offload; pack_kept compacts every kept token, sinks and recent included: 2 L (a + c) R.
  const PhaseList preg = prefill(r, "sentencekv", p);
  ASSERT_EQ(names(preg), (std::vector<std::string>{"window_scores", "topk_tokens", "sentence_means", "pack_kept"}));
  expect_work(preg[0], {L * hq * 16 * np_ * (2 * hd + 5), L * (hkv * np_ * kr + hq * 16 * hd * ba + 8 * hq * np_), 0, 0, 0, 0, 2 * L});
  expect_work(preg[1], {4 * L * np_, L * (4 * np_ + 4 * c), 0, 0, 0, 0, L});
  expect_work(preg[2], {L * hkv * c * hd, L * hkv * (c + S) * kr, 0, 0, 0, 0, L});
  expect_work(preg[3], {0, 2 * L * (a + c) * R, 0, 0, 0, 0, L});
  // Memory, gpu: HBM KV (a + c + n_o) KV_tok = 300 KV_tok, the sentence vectors, no DRAM.
  expect_memory(memory(r, "sentencekv", p),
                {(a + c + no) * KVt + S * L * hkv * kr, np_ * R, 0, 0, (a + c + no) * KVt, 0});
  p["kept_kv_on"] = 0;
  // ---- kept_sentences (a trace's measured count): S = min(kept_sentences, c, ceil((n_p - a)/24)) ----
  // 30 is used as is; 50 is capped by ceil(964 / 24) = ceil(40.17) = 41 sentences.
  for (const auto& [given, want] : std::vector<std::pair<double, double>>{{30, 30}, {50, 41}}) {
    SCOPED_TRACE(given);
    p["kept_sentences"] = given;
    const PhaseList dk = decode(r, "sentencekv", p);
    expect_work(dk[1], {4 * L * B * hkv * want, 8 * L * B * hkv * want, 0, 0, 0, 0, L});
    EXPECT_DOUBLE_EQ(dk[2].run_bytes, c / want * kr);  // t_run = c / S, inside [1, 24]
    const PhaseList pk = prefill(r, "sentencekv", p);
    expect_work(pk[2], {L * hkv * c * hd, L * hkv * (c + want) * kr, 0, 0, 0, 0, L});
    EXPECT_NEAR(memory(r, "sentencekv", p).hbm_per_seq, (a + tr + no) * KVt + want * L * hkv * kr, 1e-6);
  }
  p["kept_sentences"] = 0;
  // tau below the sinks + recent (§ sentencekv: "If tau < a, nothing is retrieved"): tau = 30 < a = 36,
  // floor(2.5 * 30) = 75 keeps c = 39 for nothing: tau' = 0, attention over a + n_g only.
  p["token_budget"] = 30;
  const PhaseList dt = decode(r, "sentencekv", p);
  expect_work(dt[2], {0, 0, 0, 0, 0, 0, L});
  expect_work(dt[3], attn(a + ng, true));
  const MemoryDemand mt = memory(r, "sentencekv", p);
  EXPECT_NEAR(mt.kv_hbm_per_seq, (a + no) * KVt, 1e-6);
  EXPECT_NEAR(mt.kv_dram_per_seq, 39 * KVt, 1e-6);
}

// docs/cost-model.md § chunkkv (seed 002: §3.2 Algorithms 1 and 3, §3.3 Algorithm 2 layer reuse,
// §B.1.1 scoring cost / N_reuse).
TEST(PinnedCosts, ChunkKv) {
  Rig r;
  const std::map<std::string, double> p = {{"chunk_size", 12}, {"budget_ratio", 0.1234}, {"budget_tokens", 0},
                                           {"obs_window", 16}, {"reuse_layers", 2}};
  const double kept = 123;    // max(floor(0.1234 * 1000) = floor(123.4), min(n_p, w))
  const double scored = 2;    // ceil(L / reuse) = ceil(1.5)
  const double chunks = 84;   // ceil(1000 / 12) = ceil(83.3)
  const PhaseList d = decode(r, "chunkkv", p);
  ASSERT_EQ(names(d), std::vector<std::string>{"attention"});
  expect_work(d[0], attn(kept + ng, true));
  const PhaseList pre = prefill(r, "chunkkv", p);
  ASSERT_EQ(names(pre), (std::vector<std::string>{"window_scores", "chunk_topk", "compact"}));
  expect_work(pre[0], {scored * hq * 16 * np_ * (2 * hd + 5), scored * (hkv * np_ * kr + hq * 16 * hd * ba + 8 * hq * np_), 0, 0, 0, 0, 2 * scored});
  expect_work(pre[1], {4 * scored * chunks + scored * hq * np_, scored * (4 * chunks + 4 * chunks), 0, 0, 0, 0, scored});
  expect_work(pre[2], {0, 2 * L * kept * R, 0, 0, 0, 0, L});  // every layer compacts its own K, V
  EXPECT_EQ(pre[2].run_bytes, 12 * kr);
  expect_memory(memory(r, "chunkkv", p), {(kept + no) * KVt, np_ * R, 0, 0, (kept + no) * KVt, 0});
  // A budget below the observation window keeps the window: max(L_max, min(n_p, w)).
  const PhaseList tiny = decode(r, "chunkkv", {{"budget_tokens", 5}, {"obs_window", 16}});
  expect_work(tiny[0], attn(16 + ng, true));
}

// docs/cost-model.md § sekv (seed 003: §3.1-3.2 spans and summaries, eq. 1 surprisal, eq. 3 routing,
// App. D eq. 18-19 factor bytes, §3.3 and §4.1 budget and zoom, Fig. 2 two-stage attention).
TEST(PinnedCosts, Sekv) {
  Rig r;
  // zoom_rate left at its default (< 0): the zoomed spans fill the budget (§3.3, §4.1).
  std::map<std::string, double> p = {{"budget_ratio", 0.5},  {"max_rank", 8},          {"routing_dim", 8},
                                     {"local_window", 100},  {"mean_span_tokens", 32}, {"anchor_ratio", 0.1},
                                     {"rank_ratio", 0.45}};
  {
    const Policy& sk = *find_policy("sekv");
    EXPECT_LT(sk.defaults()[size_t(sk.param_index("zoom_rate"))], 0);
  }
  // § sekv layout: w_l = 100, rest 900: F = 100 + 0.1 * 900 = 190, C_m = 810, m = ceil(810/32) =
  // ceil(25.3) = 26 spans, r = max(1, round(0.45 min(32, 16, 8))) = round(3.6) = 4,
  // s_b = 2 r (|S| + d + 1) b_kv = 784 (App. D eq. 18), room = beta n_p - F - m - m g d'/(2d)
  // = 500 - 190 - 26 - 26 * 2 * 8 / 32 (= 13) = 271 (reconstruction_room, §3.3: the budget counts the
  // anchors, coarse means and summaries). Fill the budget: z_s = min(m, floor(271/32) = floor(8.47)) = 8
  // whole spans, Z = min(C_m, 8 * 32) = 256 tokens.
  const double F = 190, Cm = 810, m = 26, rk = 4, sb = 2 * rk * (32 + hd + 1) * bkv, dp = 8;
  const double room = 0.5 * np_ - F - m - m * g * dp / (2 * hd);
  ASSERT_EQ(sb, 784);
  ASSERT_EQ(room, 271);
  const double zs = std::floor(room / 32), Z = std::min(Cm, zs * 32);
  ASSERT_EQ(zs, 8);
  ASSERT_EQ(Z, 256);
  const PhaseList d = decode(r, "sekv", p);
  ASSERT_EQ(names(d), (std::vector<std::string>{"route", "zoom_select", "fetch_factors", "coarse_attention", "reconstruct", "fine_attention"}));
  // route = score(hq, hq, m, d', b_kv) + projecting q to d' (eq. 3) + reading W once per step
  const Expect route = {L * B * hq * m * (2 * dp + 2) + 2 * L * B * hq * dp * hd,
                        L * B * (hq * m * dp * bkv + 4 * hq * m + hq * dp * ba) + L * hq * dp * hd * ba, 0, 0, 0, 0, L};
  expect_work(d[0], route);
  // select(hq, m, z_s), and each span's length and end once per call (docs/validation/phase-bytes.md rule 4)
  expect_work(d[1], {4 * L * B * hq * m, L * B * (hq * (4 * m + 4 * zs) + 8 * m), 0, 0, 0, 0, L});
  const double fetch = L * B * hkv * zs * sb;  // copy_h2d(hkv z_s s_b), App. D eq. 20
  expect_work(d[2], {0, fetch, fetch, fetch, 0, 0, L});
  EXPECT_EQ(d[2].run_bytes, sb / 2);
  EXPECT_EQ(d[2].stream, Stream::h2d);
  EXPECT_EQ(d[2].after[0], 1);
  const Expect coarse = attn(F + ng + m, true);  // stage 1 (Fig. 2): anchors, window, generated, coarse entries
  expect_work(d[3], coarse);
  expect_work(d[4], {4 * L * B * hkv * Z * rk * hd, L * B * hkv * (zs * sb + 2 * Z * kr), 0, 0, 0, 0, L});
  EXPECT_EQ(d[4].after[0], 2);
  Expect fine = attn(Z, false);
  fine.flops += 4 * L * B * hq * hd;  // merge of the two partial softmax states
  expect_work(d[5], fine);
  // Prefill: summaries, SVD, offload, and the LM head over the prompt that surprisal needs (§3.1 eq. 1).
  const PhaseList pre = prefill(r, "sekv", p);
  ASSERT_EQ(names(pre), (std::vector<std::string>{"span_summaries", "span_svd", "offload_factors", "surprisal_lm_head", "surprisal"}));
  expect_work(pre[0], {L * (2 * hq * np_ * hd * dp + 4 * hkv * np_ * hd), L * (2 * hkv * np_ * kr + m * (hq * dp + 2 * hkv * hd) * bkv), 0, 0, 0, 0, 3 * L});
  const double ks = 12;  // min(r + 8, |S|, d)
  expect_work(pre[1], {2 * L * hkv * m * (8 * 32 * hd * ks + 4 * 32 * ks * ks), 6 * L * hkv * m * 32 * kr + L * hkv * m * sb, 0, 0, 0, 0, 6 * L});
  expect_work(pre[2], {0, L * hkv * m * sb, L * hkv * m * sb, 0, L * hkv * m * sb, 0, L});
  EXPECT_EQ(pre[2].stream, Stream::d2h);
  // surprisal_lm_head: positions 0..n_p-2 (999 rows) through the h x V head, the weights read once per
  // prefill chunk (k = 4): 2 * 999 h V FLOPs, HBM k h V b_w + 999 (h + V) b_a, k launches.
  const double rows = np_ - 1, k = 4;
  expect_work(pre[3], {2 * rows * h * V, k * h * V * bw + rows * (h + V) * ba, 0, 0, 0, 0, k});
  EXPECT_EQ(pre[3].kind, PhaseKind::gemm);
  EXPECT_EQ(pre[3].repeat, 1);
  // surprisal: log-softmax at the observed token, ~4 FLOPs per logit; logits read, token id in, H_t out.
  expect_work(pre[4], {4 * rows * V, rows * (V * ba + 8), 0, 0, 0, 0, k});
  EXPECT_EQ(pre[4].kind, PhaseKind::elementwise);
  // § sekv Memory: HBM KV (F + n_o + m) KV_tok; + summaries m L hq d' b_kv + one layer's Z R; fixed
  // n_p R + L hq d' d b_a (W); DRAM m L hkv s_b (eq. 19).
  expect_memory(memory(r, "sekv", p), {(F + no + m) * KVt + m * L * hq * dp * bkv + Z * R,
                                       np_ * R + L * hq * dp * hd * ba, m * L * hkv * sb, 0, (F + no + m) * KVt,
                                       m * L * hkv * sb});
  std::vector<std::string> notes;
  find_policy("sekv")->notes(r.dep, Rig::params(*find_policy("sekv"), p), np_, no, notes);
  EXPECT_TRUE(notes.empty());
  // zoom_rate = 0.05 (override): Z = min(0.05 C_m, room) = min(40.5, 271) = 40.5, z_s = Z/32 (a mean,
  // not rounded).
  p["zoom_rate"] = 0.05;
  {
    const double Zo = 40.5, zo = Zo / 32;
    const PhaseList dz = decode(r, "sekv", p);
    expect_work(dz[0], route);
    expect_work(dz[1], {4 * L * B * hq * m, L * B * (hq * (4 * m + 4 * zo) + 8 * m), 0, 0, 0, 0, L});
    const double fz = L * B * hkv * zo * sb;
    expect_work(dz[2], {0, fz, fz, fz, 0, 0, L});
    expect_work(dz[3], coarse);
    expect_work(dz[4], {4 * L * B * hkv * Zo * rk * hd, L * B * hkv * (zo * sb + 2 * Zo * kr), 0, 0, 0, 0, L});
    Expect fz5 = attn(Zo, false);
    fz5.flops += 4 * L * B * hq * hd;
    expect_work(dz[5], fz5);
    EXPECT_NEAR(memory(r, "sekv", p).hbm_per_seq, (F + no + m) * KVt + m * L * hq * dp * bkv + Zo * R, 1e-6);
  }
  // A tight budget (budget_ratio 0.25): room = 250 - 190 - 26 - 13 (the summaries) = 21. The summaries
  // bind: without them room would be 34, one whole span.
  std::map<std::string, double> tight = p;
  tight["budget_ratio"] = 0.25;
  // Override (zoom_rate 0.05): 0.05 C_m = 40.5 > 21, so the budget caps the reconstructed tokens: Z = 21.
  const PhaseList dt = decode(r, "sekv", tight);
  expect_work(dt[2], {0, L * B * hkv * 21.0 / 32 * sb, L * B * hkv * 21.0 / 32 * sb, L * B * hkv * 21.0 / 32 * sb, 0, 0, L});
  expect_work(dt[4], {4 * L * B * hkv * 21 * rk * hd, L * B * hkv * (21.0 / 32 * sb + 2 * 21 * kr), 0, 0, 0, 0, L});
  EXPECT_NEAR(memory(r, "sekv", tight).hbm_per_seq, (F + no + m) * KVt + m * L * hq * dp * bkv + 21 * R, 1e-6);
  notes.clear();
  find_policy("sekv")->notes(r.dep, Rig::params(*find_policy("sekv"), tight), np_, no, notes);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("zoom_rate 0.05 asks for 40"), std::string::npos) << notes[0];
  EXPECT_NE(notes[0].find("leaves room for 21"), std::string::npos) << notes[0];
  // Fill the budget (default): floor(21/32) = 0 spans fit, so nothing is zoomed (Z = 0): no fetch, no
  // reconstruction, stage 2 over no token (only its q/o bytes and the merge), and a "no room" note.
  tight.erase("zoom_rate");
  const PhaseList df = decode(r, "sekv", tight);
  ASSERT_EQ(names(df), names(d));
  expect_work(df[1], {4 * L * B * hq * m, L * B * (hq * 4 * m + 8 * m), 0, 0, 0, 0, L});
  expect_work(df[2], {0, 0, 0, 0, 0, 0, L});
  expect_work(df[3], coarse);
  expect_work(df[4], {0, 0, 0, 0, 0, 0, L});
  Expect f0 = attn(0, false);
  f0.flops += 4 * L * B * hq * hd;
  expect_work(df[5], f0);
  expect_memory(memory(r, "sekv", tight), {(F + no + m) * KVt + m * L * hq * dp * bkv, np_ * R + L * hq * dp * hd * ba,
                                           m * L * hkv * sb, 0, (F + no + m) * KVt, m * L * hkv * sb});
  notes.clear();
  find_policy("sekv")->notes(r.dep, Rig::params(*find_policy("sekv"), tight), np_, no, notes);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_EQ(notes[0].rfind("no room to zoom", 0), 0u) << notes[0];
  EXPECT_NE(notes[0].find("leaves 21 token-equivalents"), std::string::npos) << notes[0];
  // tp = 2: each GPU holds V/tp = 500 of the vocabulary for the surprisal rows.
  Rig r2(2);
  const PhaseList p2 = prefill(r2, "sekv", p);
  ASSERT_EQ(p2.size(), 5u);
  expect_work(p2[3], {2 * rows * h * 500, k * h * 500 * bw + rows * (h + 500) * ba, 0, 0, 0, 0, k});
  expect_work(p2[4], {4 * rows * 500, rows * (500 * ba + 8), 0, 0, 0, 0, k});
}

// docs/cost-model.md § ctkvr (seed 004: §3.1.1 Algorithm 1 qcIVF, footnote 5 int32 index, §3.2 and
// Fig. 4 offload, §3.1.2 Algorithm 2 recall with footnote 6 / App. C.2 dedup alpha, §3.1.3 FIFO update).
TEST(PinnedCosts, Ctkvr) {
  Rig r;
  std::map<std::string, double> p = {{"centroids", 64},  {"probes", 4},           {"per_centroid", 50},
                                     {"budget_tokens", 40}, {"init_tokens", 16}, {"local_tokens", 200},
                                     {"dedup", 0.5},     {"rerank_on", 0}};
  // G(n) = min(1020, 216) = 216, off = 804, C_e = 64, L_r = min(804, 50 * 4 * 0.5) = 100, rho'_e = 40.
  const double G = 216, C = 64, Lr = 100, ch = 40;
  const PhaseList d = decode(r, "ctkvr", p);
  ASSERT_EQ(names(d), (std::vector<std::string>{"centroid_recall", "probe_dedup", "ids_to_host", "cpu_rerank", "cpu_attention",
                                                "partials_to_gpu", "gpu_attention", "merge", "centroid_update"}));
  expect_work(d[0], {L * B * hq * C * (2 * hd + 2), L * B * (hq * C * hd * ba + 4 * hq * C + hq * hd * ba), 0, 0, 0, 0, L});
  expect_work(d[1], {L * B * hkv * (4 * C + 2 * 4 * 50), L * B * (hq * 4 * C + hkv * (4 * 4 + 4 * (4 * 50 + Lr))), 0, 0, 0, 0, L});
  const double down = L * B * (hq * hd * ba + 4 * hkv * Lr + R);
  expect_work(d[2], {0, down, down, 0, down, 0, L});
  // The host phases' launches are host calls, one per sequence, KV head and layer, on B·hkv pieces.
  expect_work(d[3], {L * B * hkv * Lr * (2 * hd * g + 4), 0, L * B * hkv * Lr * kr, 0, 0, 0, L * B * hkv});
  expect_work(d[4], {L * B * hq * ch * (4 * hd + 5), 0, 2 * L * B * hkv * ch * kr, 0, 0, 0, L * B * hkv});
  for (const int i : {3, 4}) {
    EXPECT_EQ(gpu_launches(d[size_t(i)]), 0.0) << d[size_t(i)].name;  // host calls, not GPU kernels
    EXPECT_DOUBLE_EQ(d[size_t(i)].lanes, B * hkv) << d[size_t(i)].name;
  }
  const double up = 4 * L * B * hq * (hd + 1);
  expect_work(d[5], {0, up, up, up, 0, 0, L});
  expect_work(d[6], attn(G, true));
  expect_work(d[7], {6 * L * B * hq * hd, 12 * L * B * hq * hd, 0, 0, 0, 0, L});
  const double fifo = 4 * L * B * hkv * 50;
  expect_work(d[8], {0, fifo, fifo, fifo, 0, 0, L});
  EXPECT_TRUE(d[8].detached);
  EXPECT_EQ(d[2].stream, Stream::d2h);
  EXPECT_EQ(d[3].stream, Stream::host);
  EXPECT_EQ(d[5].stream, Stream::h2d);
  // rerank_on: gpu
  p["rerank_on"] = 1;
  const PhaseList dg = decode(r, "ctkvr", p);
  ASSERT_EQ(names(dg), (std::vector<std::string>{"centroid_recall", "probe_dedup", "recall_keys_h2d", "gpu_rerank",
                                                 "rerank_topk", "values_h2d", "attention", "evict_to_host", "centroid_update"}));
  const double keys = L * B * hkv * Lr * kr, vals = L * B * hkv * ch * kr, ev = L * B * R;
  expect_work(dg[2], {0, keys, keys, keys, 0, 0, L});
  expect_work(dg[3], {L * B * hq * Lr * (2 * hd + 2), L * B * (hkv * Lr * hd * bkv + 4 * hq * Lr + hq * hd * ba), 0, 0, 0, 0, L});
  expect_work(dg[4], {4 * L * B * hkv * Lr, L * B * hkv * (4 * Lr + 4 * ch), 0, 0, 0, 0, L});
  expect_work(dg[5], {0, vals, vals, vals, 0, 0, L});
  expect_work(dg[6], attn(G + ch, true));
  expect_work(dg[7], {0, ev, ev, 0, ev, 0, L});
  expect_work(dg[8], {0, 2 * 4 * L * B * hkv * 50, 0, 0, 0, 0, L});
  p["rerank_on"] = 0;
  const PhaseList pre = prefill(r, "ctkvr", p);
  ASSERT_EQ(names(pre), (std::vector<std::string>{"centroid_scores", "qcivf_topk", "offload"}));
  expect_work(pre[0], {L * hq * C * np_ * (2 * hd + 5), L * (hkv * np_ * kr + hq * C * hd * ba + 8 * hq * np_ + 4 * hkv * C * np_), 0, 0, 0, 0, 2 * L});
  expect_work(pre[1], {4 * L * hkv * C * np_, L * hkv * C * (4 * np_ + 4 * 50), 0, 0, 0, 0, L});
  const double off = L * (np_ - G) * R;
  expect_work(pre[2], {0, off, off, 0, off, 0, L});
  // memory at 1048 tokens: G = 216 on the GPU, 832 in DRAM; qcIVF 4 L hkv C rho; centroids L hq C d b_a.
  expect_memory(memory(r, "ctkvr", p), {G * KVt + 4 * L * hkv * C * 50 + L * hq * C * hd * ba, np_ * R,
                                        (np_ + no - G) * KVt, 0, G * KVt, (np_ + no - G) * KVt});
  // The dedup factor alpha scales the recall: alpha = 1 recalls all rho C' = 200 ids.
  p["dedup"] = 1;
  const PhaseList d1 = decode(r, "ctkvr", p);
  expect_work(d1[3], {L * B * hkv * 200 * (2 * hd * g + 4), 0, L * B * hkv * 200 * kr, 0, 0, 0, L * B * hkv});
  EXPECT_DOUBLE_EQ(d1[3].lanes, B * hkv);
}

// ---------------------------------------------------------------------------------------------
// The planner's memory arithmetic (docs/cost-model.md § Memory): the largest batch that fits is
// floor(free HBM / per-sequence HBM), and the DRAM bound applies too.
TEST(PinnedCosts, PlanMemoryBatch) {
  Rig r;
  const Policy& full = *find_policy("full");
  const ParamValues none;
  const DesignPoint p{&r.dep, &full, &none, 1000, 48, 0};
  const MemoryReport m = plan_memory(p, nullptr);
  const double usable = r.gpu.hbm_capacity_bytes * 0.9;
  const double ws = 256 * (h + (hq + 2 * hkv) * hd + hq * hd + 3 * f) * ba;  // one chunk's activations
  const double per_seq = 1048 * KVt + V * 4;                                    // KV + fp32 logits
  const double free = usable - r.dep.weight_bytes() - ws;
  EXPECT_EQ(m.max_batch, int64_t(std::floor(free / per_seq)));
  EXPECT_NEAR(m.hbm_bytes, r.dep.weight_bytes() + ws + double(m.max_batch) * per_seq, 1e-9 * m.hbm_bytes);
  EXPECT_LE(m.hbm_bytes, usable);
  EXPECT_GT(m.hbm_bytes + per_seq, usable);  // one more sequence would not fit
  // ctkvr: the DRAM bound. Shrink the host so that DRAM, not HBM, limits the batch.
  HostSpec small_host = r.host;
  const double dram_seq = (1048 - 216) * KVt;
  small_host.dram_capacity_bytes = 7.5 * dram_seq;
  Deployment d2 = r.dep;
  d2.host = &small_host;
  const Policy& ct = *find_policy("ctkvr");
  const ParamValues cv = Rig::params(ct, {{"centroids", 64}, {"per_centroid", 50}, {"init_tokens", 16}, {"local_tokens", 200}});
  const MemoryReport mc = plan_memory(DesignPoint{&d2, &ct, &cv, 1000, 48, 0}, nullptr);
  EXPECT_EQ(mc.max_batch, 7);  // floor(7.5)
  EXPECT_DOUBLE_EQ(mc.kv_dram_bytes, 7 * dram_seq);
}

// ---------------------------------------------------------------------------------------------
// The roofline (docs/cost-model.md § The roofline of one phase): time = max over the ceilings the
// phase uses, + launches x latency; the bound is the largest term; the gather penalty
// e * run / (run + half) applies per ceiling.
TEST(PinnedCosts, RooflineMaxNotSum) {
  Rig r;
  const Machine& M = r.dep.machine;
  Phase p{"x", PhaseKind::gather, Device::gpu, ComputeUnit::simt, {}};
  p.work.flops = M.simt * 1e-3;       // 1 ms of compute
  p.work.hbm_bytes = M.hbm * 2e-3;    // 2 ms of HBM
  p.work.dram_bytes = M.dram * 0.5e-3;
  PhaseTime t = roofline(p, M);
  EXPECT_NEAR(t.seconds, 2e-3, 1e-15);
  EXPECT_EQ(t.bound, Bound::hbm);
  p.work.launches = 10;
  t = roofline(p, M);
  EXPECT_NEAR(t.seconds, 2e-3 + 10 * M.kernel_latency, 1e-15);
  EXPECT_EQ(t.bound, Bound::hbm);
  // Latency wins when the fixed cost exceeds every term.
  p.work.launches = 2e-3 / M.kernel_latency * 3;
  EXPECT_EQ(roofline(p, M).bound, Bound::latency);
  // Each link is its own ceiling.
  Phase c{"c", PhaseKind::copy, Device::pcie, ComputeUnit::simt, {}};
  c.work.h2d_bytes = M.h2d * 1e-3;
  c.work.d2h_bytes = M.d2h * 3e-3;
  EXPECT_NEAR(roofline(c, M).seconds, 3e-3, 1e-15);
  EXPECT_EQ(roofline(c, M).bound, Bound::d2h);
  Phase lk{"l", PhaseKind::allreduce, Device::gpu, ComputeUnit::simt, {}};
  lk.work.link_bytes = M.link * 1e-3;
  EXPECT_NEAR(roofline(lk, M).seconds, 1e-3, 1e-15);
  EXPECT_EQ(roofline(lk, M).bound, Bound::interconnect);
  // tensor_act FLOPs run against the activation-dtype peak.
  Phase a{"a", PhaseKind::attention, Device::gpu, ComputeUnit::tensor_act, {}};
  a.work.flops = M.tensor_act * 1e-3;
  EXPECT_NEAR(roofline(a, M).seconds, 1e-3, 1e-15);
  // Gather penalty: efficiency e * run / (run + half) on the ceiling whose half-run is set.
  Calibration cal;
  cal.half_run_bytes[size_t(Ceiling::hbm)] = 64;
  Machine m2 = M;
  m2.calibration = &cal;
  Phase gth{"g", PhaseKind::gather, Device::gpu, ComputeUnit::simt, {}};
  gth.work.hbm_bytes = M.hbm * 1e-3;
  gth.run_bytes = 64;
  EXPECT_NEAR(roofline(gth, m2).seconds, 2e-3, 1e-15);  // run 64, half 64: half the bandwidth
  gth.run_bytes = 0;                                    // streaming: no penalty
  EXPECT_NEAR(roofline(gth, m2).seconds, 1e-3, 1e-15);
  // The machine: per-GPU share of the host when tp GPUs share it; the link falls back to PCIe.
  Rig r2(2);
  EXPECT_DOUBLE_EQ(r2.dep.machine.dram, r.host.dram_bandwidth / 2);
  EXPECT_DOUBLE_EQ(r2.dep.machine.host_compute, r.host.fp32 / 2);
  GpuSpec nolink = r.gpu;
  nolink.nvlink_bandwidth = 0;
  const Machine pm = make_machine(nolink, r.host, DType::bf16, DType::bf16, true, r.cal);
  EXPECT_DOUBLE_EQ(pm.link, std::min(nolink.h2d_pinned, nolink.d2h_pinned));
  const Machine nog = make_machine(r.gpu, r.host, DType::bf16, DType::bf16, false, r.cal);
  EXPECT_DOUBLE_EQ(nog.kernel_latency, r.gpu.host_launch_latency);
}

// Calibration: curves interpolate in log x between points; a run_bytes curve replaces the gather
// penalty, other curves keep it (docs/cost-model.md § Gather efficiency by run length).
TEST(PinnedCosts, CalibrationCurves) {
  EfficiencyCurve cv;
  cv.kind = PhaseKind::gather;
  cv.ceiling = Ceiling::hbm;
  cv.x = CurveVariable::bytes;
  cv.points = {{100, 0.2}, {10000, 0.8}};
  EXPECT_NEAR(cv.at(1000), 0.5, 1e-12);  // halfway in log x
  EXPECT_DOUBLE_EQ(cv.at(100), 0.2);
  EXPECT_DOUBLE_EQ(cv.at(10000), 0.8);
  bool out = false;
  EXPECT_DOUBLE_EQ(cv.at(1e6, &out), 0.8);
  EXPECT_TRUE(out);
  EXPECT_DOUBLE_EQ(cv.at(1, &out), 0.2);
  EXPECT_TRUE(out);
  cv.at(500, &out);
  EXPECT_FALSE(out);
  Calibration cal;
  cal.half_run_bytes[size_t(Ceiling::hbm)] = 32;
  cal.curves.push_back(cv);
  Phase p{"g", PhaseKind::gather, Device::gpu, ComputeUnit::simt, {}};
  p.run_bytes = 96;
  p.work.hbm_bytes = 3000;
  p.repeat = 3;  // 1000 bytes per instance
  EXPECT_NEAR(cal.efficiency(p, Ceiling::hbm, phase_bytes_on(p, Ceiling::hbm)), 0.5 * 96 / (96 + 32), 1e-12);
  EXPECT_DOUBLE_EQ(phase_bytes_on(p, Ceiling::hbm), 1000);
  // A run_bytes curve is the run-length cost itself: no extra penalty; streaming takes the last point.
  cal.curves[0].x = CurveVariable::run_bytes;
  p.run_bytes = 1000;
  EXPECT_NEAR(cal.efficiency(p, Ceiling::hbm, 0), 0.5, 1e-12);
  p.run_bytes = 0;
  EXPECT_DOUBLE_EQ(cal.efficiency(p, Ceiling::hbm, 0), 0.8);
  // No curve for this ceiling: the constant with the penalty.
  cal.per_kind[size_t(PhaseKind::gather)].of[size_t(Ceiling::dram)] = 0.5;
  cal.half_run_bytes[size_t(Ceiling::dram)] = 32;
  p.run_bytes = 32;
  EXPECT_DOUBLE_EQ(cal.efficiency(p, Ceiling::dram, 0), 0.25);
}

// ---------------------------------------------------------------------------------------------
// Simulator: rates change over time. Every number below is a hand calculation on capacities of 1
// unit per second (docs/cost-model.md § Simulated vs summed; sim/README.md).
TEST(PinnedSim, FairShareHalvesAndCaps) {
  using sim::Flow;
  // Two flows on one resource each get half.
  auto x = sim::max_min_fair({1.0}, {Flow{{1.0}}, Flow{{1.0}}});
  EXPECT_NEAR(x[0], 0.5, 1e-12);
  EXPECT_NEAR(x[1], 0.5, 1e-12);
  // Fairness is on normalized speed: flows that share a saturated resource get the same x, whatever
  // their demand (0.25 + 1 per unit of x: both at 0.8).
  x = sim::max_min_fair({1.0}, {Flow{{0.25}}, Flow{{1.0}}});
  EXPECT_NEAR(x[0], 0.8, 1e-12);
  EXPECT_NEAR(x[1], 0.8, 1e-12);
  // Two small flows fit together: both at solo speed 1 (x is capped at 1).
  x = sim::max_min_fair({1.0}, {Flow{{0.25}}, Flow{{0.25}}});
  EXPECT_NEAR(x[0], 1.0, 1e-12);
  EXPECT_NEAR(x[1], 1.0, 1e-12);
  // A flow held back by another resource leaves the shared one to the rest: A is limited by r1
  // (0.1 / 0.5 = 0.2); B then takes what A leaves of r0: 1 - 0.2 = 0.8.
  x = sim::max_min_fair({1.0, 0.1}, {Flow{{1.0, 0.5}}, Flow{{1.0, 0.0}}});
  EXPECT_NEAR(x[0], 0.2, 1e-12);
  EXPECT_NEAR(x[1], 0.8, 1e-12);
  // A flow on two resources is limited by the tighter one; a flow alone on a free resource keeps 1.
  x = sim::max_min_fair({1.0, 1.0}, {Flow{{1.0, 0.0}}, Flow{{1.0, 1.0}}, Flow{{0.0, 0.5}}});
  EXPECT_NEAR(x[0], 0.5, 1e-12);
  EXPECT_NEAR(x[1], 0.5, 1e-12);
  EXPECT_NEAR(x[2], 1.0, 1e-12);
  // Three flows, one resource: a third each; the sum never exceeds the capacity.
  x = sim::max_min_fair({2.0}, {Flow{{2.0}}, Flow{{2.0}}, Flow{{2.0}}});
  for (double v : x) EXPECT_NEAR(v, 1.0 / 3, 1e-12);
  // Enough capacity: everyone at solo speed.
  x = sim::max_min_fair({3.0}, {Flow{{1.0}}, Flow{{1.0}}});
  EXPECT_NEAR(x[0], 1.0, 1e-12);
  EXPECT_NEAR(x[1], 1.0, 1e-12);
}

TEST(PinnedSim, SharingEndsWhenOneFlowFinishes) {
  // A (1 unit) and B (3 units) on one resource of capacity 1: both at half speed until A finishes at
  // t = 2 (B has done 1); B then runs alone at full speed and finishes its 2 remaining units at t = 4.
  sim::StepGraph gph(1);
  gph.add_phase({"A", 0, {1.0}});
  gph.add_phase({"B", 0, {3.0}});
  const sim::SimTiming t = gph.run({1.0});
  EXPECT_NEAR(t.finish[0], 2.0, 1e-9);
  EXPECT_NEAR(t.finish[1], 4.0, 1e-9);  // not 6: the penalty lifts when A ends
  EXPECT_NEAR(t.makespan, 4.0, 1e-9);
  EXPECT_NEAR(t.utilization[0], 1.0, 1e-9);
  // A latency delays the flow but takes no bandwidth: A waits 1 s, B runs alone meanwhile (1 unit),
  // then they share (A 1 unit at half: 2 s, B 1 more unit), then B alone: 1 unit -> finishes at 4.
  sim::StepGraph lat(1);
  lat.add_phase({"A", 1.0, {1.0}});
  lat.add_phase({"B", 0, {3.0}});
  const sim::SimTiming tl = lat.run({1.0});
  EXPECT_NEAR(tl.finish[0], 3.0, 1e-9);
  EXPECT_NEAR(tl.finish[1], 4.0, 1e-9);
  // A chain adds: C after A, each alone.
  sim::StepGraph ch(1);
  ch.add_phase({"A", 0.5, {1.0}});
  ch.add_phase({"C", 0.25, {2.0}});
  ch.add_edge(0, 1);
  const sim::SimTiming tc = ch.run({2.0});
  EXPECT_NEAR(tc.start[1], 1.0, 1e-9);
  EXPECT_NEAR(tc.makespan, 0.5 + 0.5 + 0.25 + 1.0, 1e-9);
  ASSERT_EQ(tc.critical_path.size(), 2u);
  // A phase on two resources is timed by the slower one (max, not sum): 2 units of r0 at 1/s and
  // 1 unit of r1 at 1/s take 2 s.
  sim::StepGraph two(2);
  two.add_phase({"X", 0, {2.0, 1.0}});
  EXPECT_NEAR(two.run({1.0, 1.0}).makespan, 2.0, 1e-9);
}

TEST(PinnedSim, DuplexCouplingOnlyWhileBothDirectionsAreBusy) {
  // Resources 0 = h2d, 1 = d2h, capacity 2 each, 1 each while both carry a flow.
  const std::vector<sim::Coupling> cp = {{0, 1, 1.0, 1.0}};
  // H2D 4 units, D2H 1 unit, concurrent: both at capacity 1 until D2H ends at t = 1 (H2D has moved 1);
  // then H2D alone at 2/s: 3 units in 1.5 s -> 2.5.
  sim::StepGraph gph(2);
  gph.add_phase({"h2d", 0, {4.0, 0.0}});
  gph.add_phase({"d2h", 0, {0.0, 1.0}});
  const sim::SimTiming t = gph.run({2.0, 2.0}, cp);
  EXPECT_NEAR(t.finish[1], 1.0, 1e-9);
  EXPECT_NEAR(t.finish[0], 2.5, 1e-9);  // not 4: the coupling lifts when D2H ends
  // One direction alone: full capacity, no coupling.
  sim::StepGraph one(2);
  one.add_phase({"h2d", 0, {4.0, 0.0}});
  EXPECT_NEAR(one.run({2.0, 2.0}, cp).makespan, 2.0, 1e-9);
  // Both directions, but in sequence (an edge): each at full capacity, 2 + 0.5.
  sim::StepGraph seq(2);
  seq.add_phase({"h2d", 0, {4.0, 0.0}});
  seq.add_phase({"d2h", 0, {0.0, 1.0}});
  seq.add_edge(0, 1);
  EXPECT_NEAR(seq.run({2.0, 2.0}, cp).makespan, 2.5, 1e-9);
  // A D2H still in its launch latency does not couple: H2D (2 units) runs alone at 2/s for 1 s and
  // is done before the D2H flow starts at t = 1.
  sim::StepGraph lat(2);
  lat.add_phase({"h2d", 0, {2.0, 0.0}});
  lat.add_phase({"d2h", 1.0, {0.0, 1.0}});
  const sim::SimTiming tl = lat.run({2.0, 2.0}, cp);
  EXPECT_NEAR(tl.finish[0], 1.0, 1e-9);
  EXPECT_NEAR(tl.finish[1], 1.5, 1e-9);
  // The machine only couples when the GPU's duplex rates are below its one-way rates.
  Rig r;
  Machine m = r.dep.machine;
  m.h2d_duplex = m.h2d, m.d2h_duplex = m.d2h;
  EXPECT_TRUE(sim::couplings(m).empty());
  m.h2d_duplex = m.h2d / 2;
  ASSERT_EQ(sim::couplings(m).size(), 1u);
  EXPECT_EQ(sim::couplings(m)[0].a, size_t(sim::Resource::h2d));
  EXPECT_EQ(sim::couplings(m)[0].b, size_t(sim::Resource::d2h));
  EXPECT_EQ(sim::couplings(m)[0].a_both, m.h2d / 2);
}

// The decode graph: per-layer phases split into L nodes with 1/L of the work each; a copy overlaps
// the GPU work of its layer; o_proj waits for off-stream policy phases that are not detached.
TEST(PinnedSim, DecodeGraphSplitsLayersAndOverlapsCopies) {
  Rig r;
  const Machine& M = r.dep.machine;
  PhaseList dense;
  add_decode_dense_phases(r.dep, 1, dense);
  // A policy: a GPU score (per layer) and an H2D copy (per layer) that overlap; a detached D2H.
  Phase gpu_p{"gpu_p", PhaseKind::score, Device::gpu, ComputeUnit::simt, {}};
  gpu_p.work.hbm_bytes = L * M.hbm * 1e-3;  // 1 ms per layer
  gpu_p.repeat = L;
  Phase cp{"cp", PhaseKind::copy, Device::pcie, ComputeUnit::simt, {}};
  cp.work.h2d_bytes = L * M.h2d * 2e-3;  // 2 ms per layer
  cp.repeat = L;
  cp.stream = Stream::h2d;
  Phase det = cp;
  det.name = "det";
  det.stream = Stream::d2h;
  det.work = {};
  det.work.d2h_bytes = L * M.d2h * 50e-3;  // long, but nothing waits for it inside a layer
  det.detached = true;
  const sim::DecodeGraph gr = sim::build_decode_graph({gpu_p, cp, det}, dense, int(L), M);
  // 3 policy + 4 per-layer dense phases per layer, + lm_head.
  ASSERT_EQ(gr.graph.size(), size_t(L * 7 + 1));
  for (size_t i = 0; i < gr.graph.size(); ++i) {
    if (gr.source[i] == 0) {
      EXPECT_NEAR(gr.graph.phase(i).amount[size_t(sim::Resource::hbm)], M.hbm * 1e-3, 1e-6);
    }
  }
  const sim::SimTiming t = gr.graph.run(sim::capacities(M));  // no duplex coupling here
  // Find layer 0's cp and o_proj; o_proj starts when cp (the longer, overlapping path) ends.
  size_t cp0 = SIZE_MAX, o0 = SIZE_MAX, gp0 = SIZE_MAX;
  for (size_t i = 0; i < gr.graph.size(); ++i) {
    if (gr.layer[i] != 0) continue;
    if (gr.graph.phase(i).name == "cp") cp0 = i;
    if (gr.graph.phase(i).name == "o_proj") o0 = i;
    if (gr.graph.phase(i).name == "gpu_p") gp0 = i;
  }
  ASSERT_NE(cp0, SIZE_MAX);
  ASSERT_NE(o0, SIZE_MAX);
  EXPECT_NEAR(t.start[gp0], t.start[cp0], 1e-12);  // both released by qkv_proj(0)
  EXPECT_NEAR(t.start[o0], t.finish[cp0], 1e-12);
  EXPECT_NEAR(t.finish[cp0] - t.start[cp0], 2e-3, 1e-9);
  // The detached D2H (50 ms per layer, 150 ms over 3 layers on its stream) sets the makespan, but
  // the layers do not wait for it: the last layer's o_proj starts long before.
  EXPECT_GT(t.makespan, 0.15);
}

// ---------------------------------------------------------------------------------------------
// Reference kernels: numeric edge cases (kernels/reference/README.md).
TEST(PinnedKernels, SoftmaxWithHugeLogitsStaysFiniteAndExact) {
  // Logits of +-1e4 and 1e4 - ln 3: exp overflows float unless the max is subtracted. The output is
  // v0 * 1/(1+1/3) + v2 * (1/3)/(1+1/3) = 0.75 v0 + 0.25 v2; the lse is 1e4 + ln(4/3).
  const int d = 2;
  const float q[2] = {1.f, 0.f};
  const float big = 1e4f;
  const float K[6] = {big, 0, -big, 0, big - std::log(3.f), 0};
  const float Vv[6] = {1, 0, 0, 100, 0, 1};
  float out[2];
  const float lse = ref::decode_attention(q, K, Vv, 3, d, 1.f, out);
  EXPECT_TRUE(std::isfinite(lse));
  EXPECT_NEAR(lse, big + std::log(4.0 / 3), 3e-3);
  EXPECT_NEAR(out[0], 0.75, 2e-3);
  EXPECT_NEAR(out[1], 0.25, 2e-3);
  // Rising logits (every push rescales the running sum): the last dominates completely.
  const float K2[6] = {0, 0, 5e3f, 0, 1e4f, 0};
  const float lse2 = ref::decode_attention(q, K2, Vv, 3, d, 1.f, out);
  EXPECT_NEAR(lse2, 1e4f, 1e-2);
  EXPECT_NEAR(out[0], 0.f, 1e-6);
  EXPECT_NEAR(out[1], 1.f, 1e-6);
  // Two equal huge logits: the average of their values.
  const float K3[4] = {3e4f, 0, 3e4f, 0};
  const float V3[4] = {2, 4, 6, 8};
  const float lse3 = ref::decode_attention(q, K3, V3, 2, d, 1.f, out);
  EXPECT_NEAR(lse3, 3e4f + std::log(2.f), 5e-3);
  EXPECT_NEAR(out[0], 4.f, 1e-4);
  EXPECT_NEAR(out[1], 6.f, 1e-4);
  // A -inf bias contributes nothing; an entry with a huge negative logit contributes 0.
  const float k0[2] = {1, 0}, v0[2] = {7, 7}, v1[2] = {1, 1};
  const ref::AttnEntry e[2] = {{k0, v0, -std::numeric_limits<float>::infinity()}, {k0, v1, 0.f}};
  const float lse4 = ref::biased_attention(q, e, d, 1.f, out);
  EXPECT_NEAR(lse4, 1.f, 1e-6);
  EXPECT_FLOAT_EQ(out[0], 1.f);
  // The coarse bias log|S| makes one mean weigh like |S| equal tokens.
  EXPECT_NEAR(ref::coarse_bias(8), std::log(8.0), 1e-6);
}

TEST(PinnedKernels, EmptySelectionsAreHandled) {
  const int d = 3;
  const float q[3] = {1, 2, 3}, K[3] = {1, 1, 1}, Vv[3] = {5, 5, 5};
  float out[3] = {9, 9, 9};
  // No keys: output 0, lse -inf (merge.hpp treats it as an empty side).
  float lse = ref::decode_attention(q, K, Vv, 0, d, 1.f, out);
  EXPECT_EQ(lse, -std::numeric_limits<float>::infinity());
  for (float o : out) EXPECT_EQ(o, 0.f);
  out[0] = 9;
  const int32_t idx[1] = {0};
  lse = ref::gather_attention(q, K, Vv, 1, d, idx, 0, 1.f, out);
  EXPECT_EQ(lse, -std::numeric_limits<float>::infinity());
  EXPECT_EQ(out[0], 0.f);
  // Top-k of nothing, and k <= 0: empty.
  EXPECT_TRUE(ref::topk(std::span<const float>(), 3).empty());
  const std::vector<float> s = {1, 2, 3};
  EXPECT_TRUE(ref::topk(s, 0).empty());
  EXPECT_TRUE(ref::topk(s, -2).empty());
  EXPECT_EQ(ref::topk(s, 10).size(), 3u);
  EXPECT_EQ(ref::quantile_keep_count(0.0, 10), 0);
  EXPECT_EQ(ref::quantile_threshold(s, 0.0), std::numeric_limits<float>::infinity());
  EXPECT_TRUE(ref::quantile_select(s, 0.0).empty());
  // A bad index throws rather than reading outside the cache.
  const int32_t bad[1] = {1};
  EXPECT_THROW(ref::gather_attention(q, K, Vv, 1, d, bad, 1, 1.f, out), std::out_of_range);
}

TEST(PinnedKernels, TopkTiesAreDeterministicLowerIndexFirst) {
  // The documented order (select.hpp): higher score first, ties by the lower index, NaN last.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> s = {1, 3, nan, 3, 2, 3, -0.f, 0.f};
  EXPECT_EQ(ref::topk(s, 3), (std::vector<int32_t>{1, 3, 5}));
  EXPECT_EQ(ref::topk(s, 2), (std::vector<int32_t>{1, 3}));
  EXPECT_EQ(ref::topk(s, 8), (std::vector<int32_t>{1, 3, 5, 4, 0, 6, 7, 2}));  // -0 ties +0; NaN last
  // Many equal scores: the first k indices, whatever k.
  const std::vector<float> flat(100, 0.5f);
  const auto t = ref::topk(flat, 37);
  for (int i = 0; i < 37; ++i) EXPECT_EQ(t[size_t(i)], i);
  // Quantile counts: ceil(rho n) with rho n near an integer taken as that integer.
  EXPECT_EQ(ref::quantile_keep_count(0.3, 10), 3);
  EXPECT_EQ(ref::quantile_keep_count(0.31, 10), 4);
  EXPECT_EQ(ref::quantile_keep_count(2.0, 10), 10);
  // quantile_select keeps exactly that count even with ties at the threshold, ascending.
  EXPECT_EQ(ref::quantile_select(flat, 0.05), (std::vector<int32_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(ref::quantile_threshold(s, 0.25), 3.f);  // 2 of 8 kept: both are 3
}
