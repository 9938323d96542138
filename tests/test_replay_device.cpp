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

// Policies whose selector runs its kernels on the backend (policies/kernel_selector.hpp); the others
// select on the host and run only their attention on the device.
const std::set<std::string> kOnBackend = {"snapkv", "chunkkv", "quest", "ctkvr", "sentencekv", "chess", "sekv"};

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
    for (const auto& s : c["steps"]) steps[name][s["step"]] = s["where"];
  }
  std::string names;
  for (const auto& [name, where] : steps) names += name + " ";
  ASSERT_EQ(steps.size(), 9u) << names;
  for (auto& [name, where] : steps) {
    SCOPED_TRACE(name);
    EXPECT_EQ(where["gather_attention"], "device");
    if (name == "snapkv" || name == "chunkkv") {
      EXPECT_EQ(where["obs_window_scores"], "device");
      EXPECT_EQ(where["topk"], "device");
    }
    if (name == "quest") {
      EXPECT_EQ(where["quest_page_bound"], "device");
      EXPECT_EQ(where["quest_page_minmax"], "host");  // no CUDA twin yet
      EXPECT_EQ(where["quest_select_pages"], "host");
    }
    if (name == "sentencekv") {
      for (const char* s : {"obs_window_scores", "topk", "segment_mean", "score_gemv", "dedup"})
        EXPECT_EQ(where[s], "device") << s;
    }
    if (name == "chess") {
      for (const char* s : {"score_gemv", "chess_hierarchical_select", "dedup"}) EXPECT_EQ(where[s], "device") << s;
      for (const char* s : {"chess_page_vectors", "tail_mean", "group_mean", "chess_context_pages"})
        EXPECT_EQ(where[s], "host") << s;  // no CUDA twins yet
    }
    if (name == "ctkvr") {
      EXPECT_EQ(where["qcivf_build"], "device");
      EXPECT_EQ(where["ctkvr_recall"], "device");
      EXPECT_EQ(where["ctkvr_rerank"], "device");
    }
    if (name == "sekv") {  // its coarse span summaries are extra entries: biased attention + merge
      EXPECT_EQ(where["biased_attention"], "device");
      EXPECT_EQ(where["merge_state"], "device");
    }
  }
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
