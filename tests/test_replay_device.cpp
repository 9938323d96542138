// `kvsim replay --device cuda`: every policy's selection and attention on the CUDA kernels (emulated on
// the CPU here, kernels/README.md) against the host replay, on a synthetic and a real SmolLM2 trace.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "kernels/cuda_device.hpp"
#include "smollm2_trace.hpp"
#include "test_util.hpp"
#include "traces/format/trace_file.hpp"
#include "traces/llm/capture.hpp"
#include "traces/llm/llama.hpp"
#include "traces/llm/model_path.hpp"
#include "replay/device_check.hpp"
#include "traces/synthetic/synthetic.hpp"

using namespace kvsim;

namespace {

// Policies whose selector runs its kernels on the backend (policies/kernel_selector.hpp). Full attention
// has no selector kernels: its ids 0..p are written on the device for its attention and checked (id_lists).
const std::set<std::string> kOnBackend = {"snapkv",     "chunkkv", "quest", "ctkvr",
                                          "sentencekv", "chess",   "sekv",  "streaming"};

std::string tiny_trace() {
  static const std::string path = [] {
    const std::string p = std::string(::testing::TempDir()) + "kvsim_replay_device_tiny.safetensors";
    SyntheticTrace t(load_synthetic_config("tiny", {{"prompt_tokens", "256"}, {"generated_tokens", "12"}}));
    write_trace(p, t, DType::fp32);
    return p;
  }();
  return path;
}

nlohmann::json replay_json(const std::string& trace, const std::string& args) {
  const std::string out = std::string(::testing::TempDir()) + "kvsim_replay_device.json";
  const auto r = test::run_kvsim("replay '" + trace + "' " + args + " --format json -o '" + out + "'");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  return nlohmann::json::parse(test::read_text(out));
}

// Every policy of `j` (a --device cuda report): identical selections, outputs within tolerance, and
// the steps logged where they belong.
void expect_agreement(const nlohmann::json& j) {
  ASSERT_TRUE(j.contains("device")) << j.dump(2);
  EXPECT_NE(j["device"]["backend"].get<std::string>().find("cuda"), std::string::npos);
  // Each policy's steps over all its budgets: at a budget as large as the prompt a selector may keep
  // everything without scoring.
  std::map<std::string, std::map<std::string, std::string>> steps;
  for (const auto& p : j["policies"]) {
    const std::string name = p["policy"];
    SCOPED_TRACE(p["label"].get<std::string>());
    const auto& c = p["device_check"];
    ASSERT_TRUE(c.is_object()) << p.dump(2);
    EXPECT_GT(c["selections"].get<int64_t>(), 0);
    EXPECT_TRUE(c["selections_identical"].get<bool>()) << c.dump(2);
    EXPECT_EQ(c["mismatched_selections"], 0);
    EXPECT_GT(c["outputs"].get<int64_t>(), 0);
    EXPECT_LE(c["max_rel_error"].get<double>(), replay::kDeviceOutputTolerance) << c.dump(2);
    EXPECT_EQ(c["selection_on_backend"].get<bool>(), kOnBackend.count(name) == 1);
    if (name == "full") { EXPECT_GT(c["id_lists"].get<int64_t>(), 0); }  // its ids 0..p, written on the device
    for (const auto& s : c["steps"]) {
      // Every step on the device, through a named optimized kernel (issue #28 item 3): no host fallback.
      EXPECT_EQ(s["where"], "device") << s.dump();
      EXPECT_NE(s["kernels"].get<std::string>().find("opt::"), std::string::npos) << s.dump();
      EXPECT_GT(s["calls"].get<int64_t>(), 0);
      steps[name][s["step"]] = s["kernels"];
    }
  }
  std::string names;
  for (const auto& [name, kernels] : steps) names += name + " ";
  ASSERT_EQ(steps.size(), 9u) << names;
  // Which steps each policy runs (over all its budgets: at a budget as large as the prompt a selector may
  // keep everything without scoring).
  const std::map<std::string, std::vector<const char*>> expected = {
      {"full", {"gather_attention", "position_ids"}},
      {"streaming", {"gather_attention", "position_ids"}},
      {"snapkv", {"gather_attention", "obs_window_scores", "pool1d", "topk"}},
      {"chunkkv", {"gather_attention", "obs_window_scores", "chunk_sum", "topk"}},
      {"quest", {"gather_attention", "quest_page_minmax", "quest_page_bound", "quest_select_pages"}},
      {"sentencekv", {"gather_attention", "obs_window_scores", "topk", "segment_mean", "score_gemv", "dedup"}},
      {"chess",
       {"gather_attention", "chess_page_vectors", "tail_mean", "group_mean", "score_gemv",
        "chess_hierarchical_select", "chess_context_pages", "dedup"}},
      {"ctkvr", {"gather_attention", "qcivf_build", "ctkvr_recall", "ctkvr_rerank"}},
      // its coarse span summaries are extra entries: biased attention + merge
      {"sekv",
       {"gather_attention", "pca_projection", "truncated_svd", "sekv_summaries", "sekv_routing", "sekv_zoom",
        "biased_attention", "merge_state"}},
  };
  for (const auto& [name, want] : expected) {
    SCOPED_TRACE(name);
    for (const char* s : want) EXPECT_EQ(steps[name].count(s), 1u) << s;
  }
  EXPECT_NE(steps["snapkv"]["topk"].find("opt::topk"), std::string::npos);
  EXPECT_NE(steps["full"]["gather_attention"].find("opt::paged_decode_attention"), std::string::npos);
}

}  // namespace

TEST(ReplayDevice, TinyTraceEveryPolicyAgreesWithTheHost) {
  const auto j = replay_json(tiny_trace(), "--device cuda --max-steps 6 --budget-sweep");
  expect_agreement(j);
  if (!(cuda::built_with_cuda() && !cuda::devices().empty())) {
    EXPECT_EQ(j["device"]["backend"], "cuda (emulated on the CPU)");
    EXPECT_NE(j["device"]["timing"].get<std::string>().find("not meaningful"), std::string::npos);
  }
  // The host replay's metrics are the same with or without the device check.
  const auto host = replay_json(tiny_trace(), "--max-steps 6 --budget-sweep");
  ASSERT_EQ(host["policies"].size(), j["policies"].size());
  for (size_t i = 0; i < host["policies"].size(); ++i) {
    EXPECT_EQ(host["policies"][i]["quality"], j["policies"][i]["quality"]) << host["policies"][i]["policy"];
    EXPECT_FALSE(host["policies"][i].contains("device_check"));
  }
  EXPECT_FALSE(host.contains("device"));
}

TEST(ReplayDevice, TableAndCsvShowTheCheck) {
  auto r = test::run_kvsim("replay '" + tiny_trace() + "' --device cuda --max-steps 2 --policy quest");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("device:   cuda"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("quest_page_minmax"), std::string::npos) << r.out;
  // The per-phase kernel list: each step, where it ran and its kernels.
  EXPECT_NE(r.out.find("kernels per policy and phase:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("quest_page_minmax [device, "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("opt::quest_page_minmax (page_minmax_kernel)"), std::string::npos) << r.out;
  r = test::run_kvsim("replay '" + tiny_trace() + "' --device cuda --max-steps 2 --policy quest --format csv");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("answer_retrieved,device_selections_identical,device_max_rel_error\n"), std::string::npos)
      << r.out;
  // --device cpu is the default and adds nothing.
  const auto a = test::run_kvsim("replay '" + tiny_trace() + "' --max-steps 2 --policy quest --format csv");
  const auto b = test::run_kvsim("replay '" + tiny_trace() + "' --max-steps 2 --policy quest --format csv --device cpu");
  ASSERT_EQ(a.exit_code, 0) << a.out;
  EXPECT_EQ(a.out, b.out);
  EXPECT_EQ(a.out.find("device"), std::string::npos) << a.out;
}

TEST(ReplayDevice, BadDeviceNamesOptionValueAndChoices) {
  const auto r = test::run_kvsim("replay '" + tiny_trace() + "' --device gpu");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("--device"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("'gpu'"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("cpu, cuda"), std::string::npos) << r.out;
}

// The real model's trace (skips without SmolLM2-135M: tools/fetch-model.sh).
TEST(ReplayDevice, SmolLm2TraceEveryPolicyAgreesWithTheHost) {
  const std::string model_path = llm::default_model_path();
  if (model_path.empty()) GTEST_SKIP() << "model not available: run tools/fetch-model.sh";
  const std::string tr = std::string(::testing::TempDir()) + "kvsim_replay_device_smollm2.safetensors";
  {
    const llm::LlamaModel model(model_path);
    // About 250 tokens: long enough that every policy has a point at the sweep's smallest budgets.
    const MemoryTrace trace = test::river_trace(model, 5, 8, 6);
    write_trace(tr, trace, DType::fp32);
  }
  expect_agreement(replay_json(tr, "--device cuda --budget-sweep --max-steps 4"));
}
