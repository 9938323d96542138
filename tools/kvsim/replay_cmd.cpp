#include "tools/kvsim/replay_cmd.hpp"

#include <cstdio>
#include <memory>

#include "core/atomic_file.hpp"
#include "tools/kvsim/progress.hpp"
#include "tools/kvsim/token_span.hpp"
#include "replay/session.hpp"

namespace kvsim {

struct ReplayCommand {
  CLI::App* cmd = nullptr;
  std::string trace, scenario, format = "table", out, timeline, model_in_the_loop, needle, needle_tokens, answer, device = "cpu", kernels = "optimized";
  std::vector<std::string> policies, sets;
  bool budget_sweep = false;
  int64_t max_steps = 0;
  double memory_limit_gib = 8;
  int topk = 64, threads = 0, block_rows = 32;
};

ReplayCommand* add_replay_command(CLI::App& app) {
  static ReplayCommand c;
  c.cmd = app.add_subcommand("replay",
                             "every policy really selects on a trace: quality per policy and budget next to the "
                             "simulated TPOT with the measured statistics (docs/replay.md)");
  c.cmd->add_option("trace", c.trace, "trace file or shard directory")->required();
  c.cmd->add_option("scenario", c.scenario, "scenario YAML for the simulated columns (default: scenarios/default.yaml)");
  c.cmd->add_option("--policy", c.policies, "policy (repeatable; default: every policy with a trace selector)");
  c.cmd->add_option("--set", c.sets, "POLICY.PARAM=VALUE (repeatable)");
  c.cmd->add_flag("--budget-sweep", c.budget_sweep,
                  "replay every policy but full at budgets 64, 128, ... up to the prompt: about that many tokens "
                  "attended per step, each policy sized by its own knobs (docs/replay.md, Budgets)");
  c.cmd->add_option("--format", c.format, "output format")->check(CLI::IsMember({"table", "json", "csv"}));
  c.cmd->add_option("-o,--out", c.out, "write to FILE (atomically) instead of standard output");
  c.cmd->add_option("--timeline", c.timeline,
                    "write each policy's simulated decode step (measured statistics) as a Chrome trace-event JSON");
  c.cmd->add_option("--max-steps", c.max_steps, "replay only the first N decode rows (0 = all)")
      ->check(CLI::Range(int64_t(0), int64_t(1) << 40));
  c.cmd->add_option("--memory-limit", c.memory_limit_gib, "GiB the float32 trace may take in memory (default 8)")
      ->check(CLI::PositiveNumber);
  c.cmd->add_option("--topk", c.topk, "k of the top-k recall (default 64)")->check(CLI::Range(1, 1 << 30));
  c.cmd->add_option("--threads", c.threads, "worker threads (0 = one per core)")->check(CLI::Range(0, 4096));
  c.cmd->add_option("--block-rows", c.block_rows, "decode rows per ground-truth GEMM block (default 32)")
      ->check(CLI::Range(1, 1 << 20));
  c.cmd->add_option("--model-in-the-loop", c.model_in_the_loop,
                    "GGUF model that recorded the trace: teacher-force its tokens with each policy's attention; "
                    "report next-token agreement and NLL change versus full attention");
  c.cmd->add_option("--needle", c.needle,
                    "text of a needle in the trace's prompt: report each policy's needle recall, the share of the "
                    "needle's tokens it attends");
  c.cmd->add_option("--needle-tokens", c.needle_tokens,
                    "FIRST:END, a needle as a token span of the prompt (no tokenizer needed: a synthetic trace's "
                    "needle, whose span `kvsim trace gen` prints); reports needle recall like --needle");
  c.cmd->add_option("--answer", c.answer,
                    "text the trace's generation contains (the needle's answer); with --model-in-the-loop, report "
                    "whether greedy decoding with the policy still produces it");
  c.cmd->add_option("--device", c.device,
                    "cpu (default): the host replay; cuda: also run every policy's selection and attention on the CUDA "
                    "kernels (the GPU where one is built in and present, else emulated on the CPU) and report their "
                    "agreement with the host replay");
  c.cmd->add_option("--kernels", c.kernels,
                    "host kernels: optimized (default; kernels/host) or reference (kvsim::ref, slower; the same "
                    "selections, outputs equal to float rounding)");
  return &c;
}

int run_replay_command(ReplayCommand& c) {
  if (!c.cmd->parsed()) return -1;
  replay::ReplayRequest q;
  q.trace = c.trace;
  q.scenario = c.scenario;
  q.policies = c.policies;
  q.sets = c.sets;
  q.budget_sweep = c.budget_sweep;
  q.max_steps = c.max_steps;
  q.memory_limit_gib = c.memory_limit_gib;
  q.topk = c.topk;
  q.threads = c.threads;
  q.block_rows = c.block_rows;
  q.model_in_the_loop = c.model_in_the_loop;
  q.needle = c.needle;
  if (!c.needle_tokens.empty()) q.needle_span = parse_token_span(c.needle_tokens, "--needle-tokens");
  q.answer = c.answer;
  q.device = c.device;
  q.kernels = c.kernels;
  // One progress bar per long stage (replay, model in the loop), on a terminal only.
  std::unique_ptr<Progress> bar;
  std::string stage;
  q.progress = [&](const std::string& title, double f) {
    if (!bar || title != stage) {
      bar = std::make_unique<Progress>(title);  // the previous stage's bar finishes as it is replaced
      stage = title;
    }
    bar->update(f);
  };
  const auto report = replay::run_replay_request(q);
  bar.reset();
  const std::string text = replay::replay_report_text(*report, c.format);
  if (!c.timeline.empty()) write_file_atomic(c.timeline, replay::replay_timeline_json(*report).dump() + "\n");
  if (c.out.empty()) std::fwrite(text.data(), 1, text.size(), stdout);
  else write_file_atomic(c.out, text);
  return 0;
}

}  // namespace kvsim
