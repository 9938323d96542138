// A whole `kvsim replay` as one library call, so that any front end (the CLI, a Python module, a
// serving simulator) runs the same thing: choose the policies (every one with a trace selector by
// default), build their runs (one per budget with budget_sweep), load the trace, find the needle and
// answer with the model's tokenizer, replay, optionally decode with the model in the loop, and evaluate
// the cost model on the scenario with the analytical defaults and with the measured statistics.
// docs/replay.md documents the outputs.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/deployment.hpp"
#include "model/plan.hpp"
#include "model/scenario.hpp"
#include "traces/format/trace.hpp"
#include "replay/model_loop.hpp"
#include "replay/replay.hpp"

namespace kvsim::replay {

struct ReplayRequest {
  std::string trace;               // trace file or shard directory
  std::string scenario;            // scenario YAML for the simulated columns; empty: scenarios/default.yaml
  std::vector<std::string> policies;  // empty: every policy with a trace selector
  std::vector<std::string> sets;      // POLICY.PARAM=VALUE
  bool budget_sweep = false;
  int64_t max_steps = 0;           // decode rows replayed; 0 = all
  double memory_limit_gib = 8;     // GiB the float32 trace may take
  int topk = 64, threads = 0, block_rows = 32;
  std::string model_in_the_loop;   // GGUF path; empty: no model in the loop
  std::string needle, answer;      // texts in the prompt / the generation; empty: not asked
  // The needle as a token span [first, second) of the prompt, for traces without the model's tokenizer
  // (synthetic ones: `kvsim trace gen` prints its needles' spans); {0, 0}: not asked. Excludes `needle`.
  std::pair<int64_t, int64_t> needle_span{0, 0};
  // "cpu": the host replay alone. "cuda": also every policy's selection and attention on the CUDA kernels
  // (a GPU where one is built in and present, else the emulator), compared with the host replay.
  std::string device = "cpu";
  // "optimized" (default): the optimized host kernels (kernels/host/); "reference": the reference ones
  // (kvsim::ref), slower, the same selections (tests/test_replay_kernels.cpp).
  std::string kernels = "optimized";
  // Long stages report here as (stage title, fraction done in [0, 1]); fraction 1 closes the stage.
  std::function<void(const std::string&, double)> progress;
};

// One policy run: the replay's quality and statistics, and the plan with analytical and measured
// parameters.
struct ReplayRow {
  const PolicyReplay* rep = nullptr;
  const Policy* policy = nullptr;
  ParamValues params, measured_params;
  std::vector<CarriedStatistic> carried;
  PlanResult analytical, measured;
  const ModelLoopResult* loop = nullptr;  // nullptr without a model in the loop
};

// Everything the report shows. Not copyable: the deployment and the rows point into it.
struct ReplayReport {
  ReplayReport() = default;
  ReplayReport(const ReplayReport&) = delete;
  ReplayReport& operator=(const ReplayReport&) = delete;

  ReplayRequest request;
  Scenario scenario;
  Deployment deployment;
  TraceMeta meta;
  int64_t tokens = 0;
  int layers = 0, kv_heads = 0, query_heads = 0, head_dim = 0;  // stored counts
  ReplayResult result;
  std::vector<ModelLoopResult> loop;
  std::vector<ReplayRow> rows;
  std::vector<int32_t> needle_tokens;
  int64_t answer_end_step = -1;  // the step (0 = first generated token fed) after which the answer is complete
  int64_t context_tokens = 0;    // the scenario's context the plan is simulated at
  double context_ratio = 1;      // context_tokens / the trace's prompt
  std::string context_note;      // how statistics were carried to the scenario's context
  std::string device_note;       // --device cuda: why the emulator was chosen (empty on a GPU)
};

// Runs the request; input errors are InputError (naming the option or file).
std::unique_ptr<ReplayReport> run_replay_request(const ReplayRequest& request);
// The report as "table", "json" (kvsim.replay/1) or "csv".
std::string replay_report_text(const ReplayReport& report, const std::string& format);
// Each run's simulated decode step with the measured statistics, as a Chrome trace-event JSON.
nlohmann::json replay_timeline_json(const ReplayReport& report);

}  // namespace kvsim::replay
