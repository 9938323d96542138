// Trace replay: the engine, the baseline selectors, the statistics bridge and `kvsim replay`.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "kernels/reference/reference.hpp"
#include "core/error.hpp"
#include "test_util.hpp"
#include "traces/llm/capture.hpp"
#include "traces/llm/model_path.hpp"
#include "replay/model_loop.hpp"
#include "replay/replay.hpp"
#include "traces/synthetic/synthetic.hpp"
#include "traces/format/trace_file.hpp"
#include "policies/registry.hpp"

using namespace kvsim;
using namespace kvsim::replay;

namespace {

SyntheticConfig small_config(bool values = true) {
  return load_synthetic_config("tiny", {{"prompt_tokens", "512"}, {"generated_tokens", "48"},
                                        {"values", values ? "true" : "false"}});
}

struct Fixture {
  SyntheticTrace trace;
  TraceData data;
  explicit Fixture(bool values = true) : trace(small_config(values)), data(load_trace_data(trace, 1e9)) {}
};

ParamValues with(const char* policy, std::vector<std::pair<const char*, double>> kv) {
  const Policy* p = find_policy(policy);
  ParamValues v = p->defaults();
  for (auto& [k, x] : kv) v[size_t(p->param_index(k))] = x;
  return v;
}

ReplayOptions fast() {
  ReplayOptions o;
  o.measure_peak = false;
  return o;
}

}  // namespace

TEST(ReplayEngine, GroundTruthGemmEqualsPerQueryAttention) {
  Fixture f;
  const TraceData& t = f.data;
  int64_t s0 = 0;
  while (t.position(s0) < t.P) ++s0;
  const int64_t s1 = std::min(t.S, s0 + 13);  // a partial block
  GroundTruthBlock gt;
  const float scale = 1.0f / std::sqrt(float(t.d));
  std::vector<float> o(size_t(t.d));
  for (int l = 0; l < t.layers; ++l)
    for (int h = 0; h < t.kv_heads; ++h) {
      ground_truth_block(t, l, h, s0, s1, gt);
      for (int j = 0; j < gt.group; ++j)
        for (int64_t r = 0; r < gt.rows; ++r) {
          const int64_t n = t.position(s0 + r) + 1;
          const float* q = t.q(l, t.group_of[size_t(h)][size_t(j)], s0 + r);
          const float lse = ref::decode_attention(q, t.k(l, h), t.v(l, h), n, t.d, scale, o.data());
          for (int c = 0; c < t.d; ++c) ASSERT_NEAR(gt.o(j, r)[c], o[size_t(c)], 1e-4 * (1 + std::abs(o[size_t(c)])));
          // probabilities: p_i = exp(s_i - lse); spot-check a few and the mask
          double sum = 0;
          for (int64_t i = 0; i < gt.cols; ++i) sum += gt.p(j, r)[i];
          EXPECT_NEAR(sum, 1.0, 1e-4);
          for (int64_t i = n; i < gt.cols; ++i) ASSERT_EQ(gt.p(j, r)[i], 0.0f);
          for (int64_t i : {int64_t(0), n / 2, n - 1}) {
            float dot = 0;
            for (int c = 0; c < t.d; ++c) dot += q[c] * t.k(l, h)[i * t.d + c];
            EXPECT_NEAR(gt.p(j, r)[i], std::exp(dot * scale - lse), 1e-5);
          }
        }
    }
}

TEST(ReplayBaselines, EverythingBudgetEqualsFullAttention) {
  Fixture f;
  const double T = double(f.data.T);
  std::vector<PolicyRun> runs = {
      {"full", {}, ""},
      {"streaming", with("streaming", {{"sinks", 4}, {"window", T}}), ""},
      {"snapkv", with("snapkv", {{"budget_tokens", T}}), ""},
      {"quest", with("quest", {{"budget_tokens", T}}), ""},
      // SnapKV exactly at the prompt: keeps the whole prompt through its top-k path's boundary
      {"snapkv", with("snapkv", {{"budget_tokens", double(f.data.P)}}), "snapkv@P"},
  };
  const ReplayResult r = run_replay(f.data, runs, fast());
  ASSERT_EQ(r.policies.size(), runs.size());
  EXPECT_EQ(r.decode_rows, 48);
  for (const PolicyReplay& p : r.policies) {
    SCOPED_TRACE(p.run.label);
    EXPECT_GT(p.overall.recall.n, 0);
    EXPECT_NEAR(p.overall.recall.min, 1.0, 1e-5);
    EXPECT_NEAR(p.overall.topk_recall.min, 1.0, 1e-9);
    ASSERT_TRUE(p.overall.error.has_value());
    EXPECT_LT(p.overall.error->max, 1e-5);
  }
}

TEST(ReplayBaselines, RecallIsMonotoneInBudget) {
  Fixture f;
  std::vector<PolicyRun> runs;
  const std::vector<double> budgets = {64, 128, 256, 512};
  for (double b : budgets) {
    runs.push_back({"streaming", with("streaming", {{"sinks", 4}, {"window", b - 4}}), ""});
    runs.push_back({"snapkv", with("snapkv", {{"budget_tokens", b}}), ""});
    runs.push_back({"quest", with("quest", {{"budget_tokens", b}}), ""});
  }
  const ReplayResult r = run_replay(f.data, runs, fast());
  for (int pol = 0; pol < 3; ++pol) {
    double prev = -1, prev_top = -1;
    for (size_t b = 0; b < budgets.size(); ++b) {
      const PolicyReplay& p = r.policies[b * 3 + size_t(pol)];
      SCOPED_TRACE(p.run.policy + " budget " + std::to_string(budgets[b]));
      EXPECT_GE(p.overall.recall.mean, prev - 1e-9);
      EXPECT_GE(p.overall.topk_recall.mean, prev_top - 1e-9);
      EXPECT_LE(p.overall.recall.mean, 1.0 + 1e-6);
      EXPECT_GT(p.overall.recall.mean, 0.0);
      prev = p.overall.recall.mean;
      prev_top = p.overall.topk_recall.mean;
    }
  }
  // A query-aware selection beats recency at the same small budget on a trace with retrieval heads.
  EXPECT_GT(r.policies[2].overall.recall.mean, r.policies[0].overall.recall.mean);
}

TEST(ReplayBaselines, QuestKeepsTheLastPageAndItsBudget) {
  Fixture f;
  const TraceData& t = f.data;
  auto sel = make_selector("quest", with("quest", {{"page_size", 16}, {"budget_tokens", 64}}));
  sel->prefill(t);
  std::vector<HeadSelection> out(size_t(t.layers * t.kv_heads));
  for (int64_t s = 0; s < t.S; ++s) {
    if (t.position(s) < t.P) continue;
    for (auto& h : out) h.clear();
    sel->select(t, s, out);
    const int64_t p = t.position(s), last = p / 16 * 16;
    for (const HeadSelection& h : out) {
      EXPECT_FALSE(h.all);
      ASSERT_TRUE(std::is_sorted(h.tokens.begin(), h.tokens.end()));
      EXPECT_LE(int64_t(h.tokens.size()), 64);
      EXPECT_EQ(h.tokens.back(), p);
      for (int64_t i = last; i <= p; ++i)
        EXPECT_TRUE(std::binary_search(h.tokens.begin(), h.tokens.end(), int32_t(i))) << "token " << i;
    }
  }
  EXPECT_GT(sel->statistics().at("pages_selected").value, 3.0);
}

TEST(ReplayBaselines, SnapKvKeepsTheObservationWindowAndGeneratedTokens) {
  Fixture f;
  const TraceData& t = f.data;
  auto sel = make_selector("snapkv", with("snapkv", {{"budget_tokens", 128}, {"obs_window", 32}}));
  sel->prefill(t);
  std::vector<HeadSelection> out(size_t(t.layers * t.kv_heads));
  int64_t s = 0;
  while (t.position(s) < t.P) ++s;
  s += 5;
  sel->select(t, s, out);
  const int64_t p = t.position(s);
  for (const HeadSelection& h : out) {
    ASSERT_TRUE(std::is_sorted(h.tokens.begin(), h.tokens.end()));
    EXPECT_EQ(int64_t(h.tokens.size()), 128 + (p - t.P + 1));
    for (int64_t i = t.P - 32; i <= p; ++i)
      EXPECT_TRUE(std::binary_search(h.tokens.begin(), h.tokens.end(), int32_t(i))) << "token " << i;
  }
  // Different KV heads pick different prompt tokens (selection is per head, from the data).
  EXPECT_NE(out[0].tokens, out[1].tokens);
  EXPECT_EQ(sel->statistics().at("obs_window_rows").value, 32);
}

TEST(ReplayEngine, TraceWithoutValuesHasRecallButNoError) {
  Fixture f(false);
  EXPECT_TRUE(f.data.values.empty());
  const ReplayResult r = run_replay(f.data, {{"quest", with("quest", {{"budget_tokens", 128}}), ""}}, fast());
  EXPECT_FALSE(r.policies[0].overall.error.has_value());
  EXPECT_GT(r.policies[0].overall.recall.mean, 0.1);
}

TEST(ReplayEngine, ThreadsGiveTheSameMetrics) {
  Fixture f;
  ReplayOptions a = fast(), b = fast();
  a.threads = 1;
  b.threads = 3;
  b.block_rows = 7;
  const std::vector<PolicyRun> runs = {{"quest", with("quest", {{"budget_tokens", 96}}), ""}};
  const ReplayResult ra = run_replay(f.data, runs, a), rb = run_replay(f.data, runs, b);
  EXPECT_NEAR(ra.policies[0].overall.recall.mean, rb.policies[0].overall.recall.mean, 1e-6);
  EXPECT_NEAR(ra.policies[0].overall.error->p90, rb.policies[0].overall.error->p90, 1e-5);
  EXPECT_EQ(ra.policies[0].per_layer.size(), 2u);
  EXPECT_EQ(ra.policies[0].per_range.size(), 4u);
}

TEST(ReplayEngine, MemoryLimitErrorNamesTheTraceBytesAndSlice) {
  SyntheticTrace trace(small_config());
  try {
    load_trace_data(trace, 1000, "my.safetensors");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("my.safetensors"), std::string::npos) << m;
    EXPECT_NE(m.find(std::to_string(int64_t(trace_data_bytes(trace)))), std::string::npos) << m;
    EXPECT_NE(m.find("kvsim trace slice"), std::string::npos) << m;
    EXPECT_NE(m.find("limit"), std::string::npos) << m;
  }
}

TEST(ReplayStatistics, AppliedToParamsByName) {
  const Policy& ctkvr = *find_policy("ctkvr");
  ParamValues v = ctkvr.defaults();
  const auto carried = apply_statistics(ctkvr, v, {{"dedup", {0.3, 100, "x"}}, {"not_a_param", {7, 1, ""}}}, 4.0);
  ASSERT_EQ(carried.size(), 1u);
  EXPECT_EQ(carried[0].param, "dedup");
  EXPECT_EQ(carried[0].rule, CarryRule::as_is);
  EXPECT_DOUBLE_EQ(v[size_t(ctkvr.param_index("dedup"))], 0.3);
  EXPECT_DOUBLE_EQ(carried[0].analytical, 0.5);

  const Policy& sekv = *find_policy("sekv");
  ParamValues sv;  // empty: defaults first
  apply_statistics(sekv, sv, {{"zoom_rate", {0.02, 10, ""}}, {"mean_span_tokens", {20, 10, ""}}}, 8.0);
  EXPECT_DOUBLE_EQ(sv[size_t(sekv.param_index("zoom_rate"))], 0.02);
  EXPECT_DOUBLE_EQ(sv[size_t(sekv.param_index("mean_span_tokens"))], 20);  // text shape: as is

  const Policy& quest = *find_policy("quest");
  ParamValues qv = quest.defaults();
  const auto qc = apply_statistics(quest, qv, {{"budget_tokens", {100, 5, ""}}}, 2.5);
  ASSERT_EQ(qc.size(), 1u);
  EXPECT_EQ(qc[0].rule, CarryRule::scale_context);
  EXPECT_DOUBLE_EQ(qv[size_t(quest.param_index("budget_tokens"))], 250);
  // no samples: nothing carried
  ParamValues cv = ctkvr.defaults();
  EXPECT_TRUE(apply_statistics(ctkvr, cv, {{"dedup", {0.3, 0, ""}}}).empty());
  // The rule is the parameter's own, from its policy's table: a text-shape mean and an interval carry as is.
  const Policy& skv = *find_policy("sentencekv");
  const Policy& chess = *find_policy("chess");
  EXPECT_EQ(skv.params()[size_t(skv.param_index("mean_sentence_tokens"))].carry, CarryRule::as_is);
  EXPECT_EQ(chess.params()[size_t(chess.param_index("reselect_pages"))].carry, CarryRule::as_is);
}

TEST(ReplayRegistry, BaselinesHaveSelectors) {
  for (const char* p : {"full", "streaming", "snapkv", "quest"}) {
    EXPECT_TRUE(has_selector(p)) << p;
    EXPECT_NE(make_selector(p, {}), nullptr) << p;
  }
  EXPECT_FALSE(has_selector("no-such-policy"));
  EXPECT_EQ(make_selector("no-such-policy", {}), nullptr);
}

namespace {
std::string tiny_trace_file() {
  static const std::string path = [] {
    const std::string p = std::string(::testing::TempDir()) + "kvsim_replay_tiny.safetensors";
    SyntheticTrace t(small_config());
    write_trace(p, t, DType::fp32);
    return p;
  }();
  return path;
}
}  // namespace

TEST(ReplayCli, TableHasARowPerPolicy) {
  const auto r = test::run_kvsim("replay '" + tiny_trace_file() + "'");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  for (const char* p : {"full", "streaming", "snapkv", "quest"}) EXPECT_NE(r.out.find(std::string("\n") + p + " "), std::string::npos) << p << "\n" << r.out;
  EXPECT_NE(r.out.find("scenario's context"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("SGEMM peak"), std::string::npos) << r.out;
}

TEST(ReplayCli, JsonParsesWithSchema) {
  const std::string out = std::string(::testing::TempDir()) + "kvsim_replay.json";
  const std::string timeline = std::string(::testing::TempDir()) + "kvsim_replay_timeline.json";
  const auto r = test::run_kvsim("replay '" + tiny_trace_file() +
                                 "' --policy quest --policy snapkv --set quest.budget_tokens=128 --format json -o '" + out +
                                 "' --timeline '" + timeline + "'");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto j = nlohmann::json::parse(test::read_text(out));
  EXPECT_EQ(j["schema"], "kvsim.replay/1");
  ASSERT_EQ(j["policies"].size(), 2u);
  EXPECT_EQ(j["policies"][0]["policy"], "quest");
  EXPECT_EQ(j["policies"][0]["params"]["budget_tokens"], 128);
  EXPECT_TRUE(j["policies"][0]["quality"]["attention_recall"]["mean"].is_number());
  EXPECT_TRUE(j["policies"][0]["plan"]["measured"]["tpot_s"].is_number());
  EXPECT_GT(j["performance"]["sgemm_peak_flops_per_core"].get<double>(), 0);
  EXPECT_EQ(j["policies"][0]["per_layer"].size(), 2u);
  EXPECT_TRUE(j["policies"][0]["plan"]["measured"]["decode_step_bytes"]["hbm"].is_number());
  const auto tl = nlohmann::json::parse(test::read_text(timeline));
  EXPECT_FALSE(tl["traceEvents"].empty());
}

TEST(ReplayCli, ScenarioPolicyParamsAreKept) {
  const std::string sc = test::write_temp("kvsim_replay_scenario.yaml",
                                          "hardware: h100-sxm\nmodel: llama-3.1-8b\nworkload:\n  context_tokens: 32768\n"
                                          "  output_tokens: 256\n  batch: 1\npolicies:\n"
                                          "  - {name: quest, budget_tokens: 256}\n  - {name: snapkv, budget_tokens: 300}\n");
  const std::string out = std::string(::testing::TempDir()) + "kvsim_replay_sc.json";
  const auto r = test::run_kvsim("replay '" + tiny_trace_file() + "' '" + sc +
                                 "' --policy quest --policy snapkv --set snapkv.budget_tokens=200 --format json -o '" + out + "'");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto j = nlohmann::json::parse(test::read_text(out));
  EXPECT_EQ(j["scenario"]["context_tokens"], 32768);
  EXPECT_EQ(j["policies"][0]["params"]["budget_tokens"], 256);
  EXPECT_EQ(j["policies"][1]["params"]["budget_tokens"], 200);
}

TEST(ReplayCli, BudgetSweepCsv) {
  const auto r = test::run_kvsim("replay '" + tiny_trace_file() + "' --policy quest --budget-sweep --format csv");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("quest@64,"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("quest@512,"), std::string::npos) << r.out;
}

TEST(ReplayCli, BadInputExits2) {
  auto r = test::run_kvsim("replay '" + tiny_trace_file() + "' --policy nope");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("nope"), std::string::npos) << r.out;
  r = test::run_kvsim("replay '" + tiny_trace_file() + "' --set quest.nope=3 --policy quest");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  r = test::run_kvsim("replay /no/such/trace.safetensors");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  r = test::run_kvsim("replay '" + tiny_trace_file() + "' --memory-limit 0.000001");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("kvsim trace slice"), std::string::npos) << r.out;
  r = test::run_kvsim("replay '" + tiny_trace_file() + "' --model-in-the-loop /no/such/model.gguf");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("does not exist"), std::string::npos) << r.out;
}

// ---- model in the loop (skips without SmolLM2-135M: tools/fetch-model.sh) ----------------------

namespace {
struct LoopFixture {
  std::unique_ptr<llm::LlamaModel> model;
  std::unique_ptr<MemoryTrace> trace;
  TraceData data;
};
LoopFixture* loop_fixture() {
  static std::unique_ptr<LoopFixture> f = []() -> std::unique_ptr<LoopFixture> {
    const std::string path = llm::default_model_path();
    if (path.empty()) return nullptr;
    auto x = std::make_unique<LoopFixture>();
    x->model = std::make_unique<llm::LlamaModel>(path);
    const auto prompt = x->model->tokenizer().encode(
        "The river runs through the old town. Farmers sell apples at the market by the bridge. In winter the "
        "river freezes and children skate on it. The market moves indoors. Question: what do farmers sell?");
    llm::CaptureOptions o;
    o.obs_window = 8;
    o.stop_at_eos = false;
    o.threads = 2;
    x->trace = std::make_unique<MemoryTrace>(llm::capture_trace(*x->model, prompt, 10, o));
    x->data = load_trace_data(*x->trace, 1e9);
    return x;
  }();
  return f.get();
}
}  // namespace

TEST(ReplayModelLoop, EverythingBudgetAgreesWithFullAttention) {
  LoopFixture* f = loop_fixture();
  if (!f) GTEST_SKIP() << "model not available: run tools/fetch-model.sh";
  const double T = double(f->data.T);
  const auto res = run_model_in_the_loop(*f->model, "model.gguf", f->data,
                                         {{"full", {}, ""}, {"quest", with("quest", {{"budget_tokens", T}}), ""},
                                          {"quest", with("quest", {{"budget_tokens", 16}}), "quest@16"}},
                                         0, 2);
  ASSERT_EQ(res.size(), 3u);
  for (size_t i = 0; i < 2; ++i) {
    SCOPED_TRACE(res[i].label);
    EXPECT_EQ(res[i].steps, 9);
    EXPECT_EQ(res[i].agreement, 1.0);
    EXPECT_NEAR(res[i].nll_change, 0.0, 1e-3);
  }
  EXPECT_GE(res[2].agreement, 0.0);
  EXPECT_LE(res[2].agreement, 1.0);
  EXPECT_GT(res[2].nll_full, 0.0);
}

TEST(ReplayModelLoop, ModelMustMatchTheTrace) {
  LoopFixture* f = loop_fixture();
  if (!f) GTEST_SKIP() << "model not available: run tools/fetch-model.sh";
  SyntheticTrace other(small_config());
  const TraceData d = load_trace_data(other, 1e9);
  try {
    run_model_in_the_loop(*f->model, "model.gguf", d, {{"full", {}, ""}});
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("model.gguf"), std::string::npos) << e.what();
  }
}

TEST(ReplayModelLoop, CliReportsAgreementAndNll) {
  LoopFixture* f = loop_fixture();
  if (!f) GTEST_SKIP() << "model not available: run tools/fetch-model.sh";
  const std::string tr = std::string(::testing::TempDir()) + "kvsim_replay_loop.safetensors";
  write_trace(tr, *f->trace, DType::fp32);
  const std::string out = std::string(::testing::TempDir()) + "kvsim_replay_loop.json";
  const auto r = test::run_kvsim("replay '" + tr + "' --policy quest --set quest.budget_tokens=32 --max-steps 3 "
                                 "--format json -o '" + out + "' --model-in-the-loop '" + llm::default_model_path() + "'");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto j = nlohmann::json::parse(test::read_text(out));
  const auto& m = j["policies"][0]["model_in_the_loop"];
  ASSERT_TRUE(m.is_object()) << j.dump(2);
  EXPECT_EQ(m["steps"], 3);
  EXPECT_GE(m["next_token_agreement"].get<double>(), 0.0);
  EXPECT_TRUE(m["nll_change"].is_number());
}
