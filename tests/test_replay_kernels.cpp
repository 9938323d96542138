// Replay on the optimized host kernels (kernels/host/) selects exactly what it selects on the reference
// kernels (kvsim::ref): every policy, every decode row, every (layer, KV head), on a synthetic trace and on
// a real SmolLM2 trace; the statistics the selectors measure are equal too, and `kvsim replay --kernels`
// reports the same quality either way (outputs to float rounding).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "kernels/backend/backend.hpp"
#include "policies/kernel_selector.hpp"
#include "policies/registry.hpp"
#include "smollm2_trace.hpp"
#include "test_util.hpp"
#include "traces/format/trace_file.hpp"
#include "traces/llm/capture.hpp"
#include "traces/llm/llama.hpp"
#include "traces/llm/model_path.hpp"
#include "replay/device_check.hpp"
#include "replay/replay.hpp"
#include "traces/synthetic/synthetic.hpp"

using namespace kvsim;

namespace {

// Every policy with a selector, at its defaults and at a small budget, on both backends.
void expect_identical_selections(const TraceSource& src) {
  const replay::TraceData t = replay::load_trace_data(src, 4e9, "test trace");
  int policies = 0;
  for (const std::string& name : policy_names()) {
    if (!replay::has_selector(name)) continue;
    ++policies;
    SCOPED_TRACE(name);
    auto a = replay::make_selector(name, {});
    auto b = replay::make_selector(name, {});
    auto* ka = dynamic_cast<policies::KernelSelector*>(a.get());
    auto* kb = dynamic_cast<policies::KernelSelector*>(b.get());
    if (ka) {
      ASSERT_TRUE(kb);
      ka->use_backend(kernels::host_backend());
      kb->use_backend(kernels::host_optimized_backend());
    }
    a->prefill(t);
    b->prefill(t);
    const int pairs = t.layers * t.kv_heads;
    std::vector<replay::HeadSelection> sa(static_cast<size_t>(pairs)), sb(static_cast<size_t>(pairs));
    int64_t rows = 0, compared = 0;
    for (int64_t s = 0; s < t.S; ++s) {
      if (t.position(s) < t.P) continue;
      for (auto& h : sa) h.clear();
      for (auto& h : sb) h.clear();
      a->select(t, s, sa);
      b->select(t, s, sb);
      ++rows;
      for (int p = 0; p < pairs; ++p) {
        ++compared;
        ASSERT_TRUE(replay::same_selection(sa[size_t(p)], sb[size_t(p)])) << "row " << s << " pair " << p;
        sa[size_t(p)].flatten_extras(t.d);
        sb[size_t(p)].flatten_extras(t.d);
        ASSERT_EQ(sa[size_t(p)].extra_bias, sb[size_t(p)].extra_bias) << "row " << s << " pair " << p;
      }
    }
    EXPECT_GT(rows, 0);
    EXPECT_GT(compared, 0);
    const auto st_a = a->statistics(), st_b = b->statistics();
    ASSERT_EQ(st_a.size(), st_b.size());
    for (const auto& [k, v] : st_a) {
      ASSERT_TRUE(st_b.count(k)) << k;
      // SEKV's rank statistics come from SVDs done two ways (kernels/host/lowrank.hpp): equal ranks,
      // energies to double rounding.
      EXPECT_NEAR(v.value, st_b.at(k).value, 1e-9 * std::max(1.0, std::abs(v.value))) << k;
      EXPECT_EQ(v.samples, st_b.at(k).samples) << k;
    }
  }
  EXPECT_EQ(policies, 9);
}

}  // namespace

TEST(ReplayKernels, SyntheticTraceSelectionsAreIdentical) {
  // Long enough that every policy prunes: SnapKV's window, Quest's pages, CHESS's grids, CTKVR's lists.
  const SyntheticTrace t(load_synthetic_config("tiny", {{"prompt_tokens", "1200"}, {"generated_tokens", "10"}}));
  expect_identical_selections(t);
}

TEST(ReplayKernels, SmolLm2TraceSelectionsAreIdentical) {
  const std::string model_path = llm::default_model_path();
  if (model_path.empty()) GTEST_SKIP() << "model not available: run tools/fetch-model.sh";
  const llm::LlamaModel model(model_path);
  const MemoryTrace trace = test::river_trace(model, 7, 16, 6);
  expect_identical_selections(trace);
}

TEST(ReplayKernels, CliReportsTheSameQualityWithEitherKernels) {
  const std::string tr = std::string(::testing::TempDir()) + "kvsim_replay_kernels.safetensors";
  {
    SyntheticTrace t(load_synthetic_config("tiny", {{"prompt_tokens", "600"}, {"generated_tokens", "8"}}));
    write_trace(tr, t, DType::fp32);
  }
  auto run = [&](const std::string& kernels) {
    const std::string out = std::string(::testing::TempDir()) + "kvsim_replay_kernels_" + kernels + ".json";
    const auto r = test::run_kvsim("replay '" + tr + "' --kernels " + kernels + " --format json -o '" + out + "'");
    EXPECT_EQ(r.exit_code, 0) << r.out;
    return nlohmann::json::parse(test::read_text(out));
  };
  const auto opt = run("optimized"), ref = run("reference");
  EXPECT_EQ(opt["options"]["kernels"], "optimized");
  EXPECT_EQ(ref["options"]["kernels"], "reference");
  ASSERT_EQ(opt["policies"].size(), 9u);
  ASSERT_EQ(opt["policies"].size(), ref["policies"].size());
  for (size_t i = 0; i < opt["policies"].size(); ++i) {
    const auto &a = opt["policies"][i], &b = ref["policies"][i];
    SCOPED_TRACE(a["label"].get<std::string>());
    EXPECT_TRUE(a["select_s"].is_number());  // each policy's selection time
    for (const char* k : {"attention_recall", "topk_recall", "tokens_attended"})
      EXPECT_EQ(a["quality"][k], b["quality"][k]) << k;
    EXPECT_NEAR(a["quality"]["output_error"]["mean"].get<double>(), b["quality"]["output_error"]["mean"].get<double>(),
                1e-4);
  }
  const auto bad = test::run_kvsim("replay '" + tr + "' --kernels fast");
  EXPECT_EQ(bad.exit_code, 2) << bad.out;
  EXPECT_NE(bad.out.find("--kernels"), std::string::npos) << bad.out;
  EXPECT_NE(bad.out.find("'fast'"), std::string::npos) << bad.out;
  EXPECT_NE(bad.out.find("optimized, reference"), std::string::npos) << bad.out;
}
