#include "tools/kvsim/sweep_cmd.hpp"

#include <unistd.h>

#include <cstdio>

#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "sweep/pareto.hpp"
#include "sweep/result_store.hpp"
#include "sweep/runner.hpp"
#include "tools/kvsim/progress.hpp"

namespace kvsim {

struct SweepCommand {
  CLI::App* cmd = nullptr;
  CLI::App* merge = nullptr;
  std::string spec, out, shard = "0/1", merge_out;
  std::vector<std::string> merge_inputs, pareto;
  int threads = 0;
  uint64_t stop_after = 0;
  bool quiet = false;
};

SweepCommand* add_sweep_command(CLI::App& app) {
  static SweepCommand c;
  c.cmd = app.add_subcommand("sweep", "evaluate every point of a design-space sweep into a CSV, in parallel, "
                                      "resumable and shardable (docs/sweeps.md)");
  c.cmd->add_option("sweep", c.spec, "sweep YAML (docs/sweeps.md)");
  c.cmd->add_option("-o,--out", c.out, "results CSV: appended as points finish; a rerun skips the points present");
  c.cmd->add_option("--shard", c.shard, "run only shard i of N (points with number % N == i), e.g. 2/8");
  c.cmd->add_option("--threads", c.threads, "worker threads (0 = one per core)")->check(CLI::Range(0, 4096));
  c.cmd->add_flag("-q,--quiet", c.quiet, "no progress bar and no summary line");
  // Testing: stop after committing N new points, as if killed right after them.
  c.cmd->add_option("--stop-after", c.stop_after)->group("");
  c.merge = c.cmd->add_subcommand("merge", "join shard results into one file (rows in point order) and write its "
                                            "Pareto fronts");
  c.merge->fallthrough();  // -q and --threads are the parent's
  c.merge->add_option("inputs", c.merge_inputs, "shard result files")->required();
  c.merge->add_option("-o,--out", c.merge_out, "merged CSV (written atomically)")->required();
  c.merge->add_option("--sweep", c.spec, "the sweep file, for its Pareto fronts (default: TPOT against "
                                         "throughput, and recall against both when the results have recall)");
  return &c;
}

namespace {
int run_merge(SweepCommand& c) {
  const std::string merged = sweep::merge_results(c.merge_inputs);
  write_file_atomic(c.merge_out, merged);
  const sweep::ResultTable t = sweep::read_results(c.merge_out);
  std::vector<sweep::ParetoSpec> fronts;
  if (!c.spec.empty()) {
    fronts = sweep::load_sweep_file(c.spec).pareto;
  } else if (t.header.find(",recall_mean,") != std::string::npos) {
    fronts = {{"tpot_s", "recall_mean"}, {"throughput_tok_s", "recall_mean"}};
  } else {
    fronts = {{"tpot_s", "throughput_tok_s"}};
  }
  write_file_atomic(sweep::pareto_path(c.merge_out), sweep::pareto_csv(t, fronts, c.merge_out));
  if (!c.quiet)
    std::fprintf(stderr, "kvsim sweep merge: %zu rows from %zu files -> %s (fronts: %s)\n", t.rows.size(),
                 c.merge_inputs.size(), c.merge_out.c_str(), sweep::pareto_path(c.merge_out).c_str());
  return 0;
}
}  // namespace

int run_sweep_command(SweepCommand& c) {
  if (!c.cmd->parsed()) return -1;
  if (c.merge->parsed()) return run_merge(c);
  if (c.spec.empty()) throw_input_error("command line", 0, "sweep", "give a sweep file (or `kvsim sweep merge`)");
  if (c.out.empty()) throw_input_error("command line", 0, "-o", "give the results file with -o FILE.csv");
  const sweep::SweepSpec spec = sweep::load_sweep_file(c.spec);
  sweep::RunOptions o;
  o.shard = sweep::parse_shard(c.shard);
  o.threads = c.threads;
  o.stop_after = c.stop_after;
  const bool tty = !c.quiet && ::isatty(STDERR_FILENO);
  Progress replay_bar("replaying trace", tty), bar("sweep " + c.spec, tty);
  o.replay_progress = [&](double f) { replay_bar.update(f); };
  o.progress = [&](double f) {
    replay_bar.finish();
    bar.update(f);
  };
  const sweep::RunStats st = sweep::run_sweep(spec, c.out, o);
  bar.finish();
  if (!c.quiet) {
    const double rate = st.evaluate_seconds > 0 ? double(st.evaluated) / st.evaluate_seconds : 0;
    std::fprintf(stderr,
                 "kvsim sweep: %llu of %llu points in shard %s; %llu evaluated (%.0f points/s on %d threads), %llu "
                 "already present%s%s\n",
                 (unsigned long long)st.shard_points, (unsigned long long)st.total_points, c.shard.c_str(),
                 (unsigned long long)st.evaluated, rate, st.threads, (unsigned long long)st.present,
                 st.replayed ? (", " + std::to_string(st.replayed) + " configurations replayed in " +
                                std::to_string(st.replay_seconds) + " s").c_str()
                             : "",
                 st.stopped ? "; stopped early (--stop-after)" : "");
  }
  return 0;
}

}  // namespace kvsim
