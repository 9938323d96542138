// Sweeps (docs/sweeps.md): parsing and checking sweep files, expansion, deterministic parallel
// output, shards merging into the unsharded file byte for byte, resuming an interrupted sweep
// (stopped after N points, and killed with SIGKILL) into the uninterrupted file, Pareto fronts.
#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <thread>

#include "core/error.hpp"
#include <nlohmann/json.hpp>

#include "core/csv.hpp"
#include "sweep/pareto.hpp"
#include "sweep/result_store.hpp"
#include "sweep/runner.hpp"
#include "test_util.hpp"

using namespace kvsim;
using namespace kvsim::sweep;

namespace {
#define EXPECT_HAS(msg, part) EXPECT_NE((msg).find(part), std::string::npos) << "message: " << (msg)

const char* kBase = R"(scenario:
  hardware: h100-sxm
  model: llama-3.1-8b
  workload:
    context_tokens: 32768
    output_tokens: 512
    batch: max
policies: [full, quest, chess]
)";

std::string error_of(const std::string& yaml) {
  try {
    load_sweep(load_yaml_string(yaml, "s.yaml"), "s.yaml");
    return "";
  } catch (const InputError& e) {
    return e.what();
  }
}
SweepSpec spec_of(const std::string& yaml) { return load_sweep(load_yaml_string(yaml, "s.yaml"), "s.yaml"); }
std::string tmp(const std::string& name) {
  const std::string p = std::string(::testing::TempDir()) + "kvsim_sweep_" + name;
  std::filesystem::remove(p);
  std::filesystem::remove(pareto_path(p));
  return p;
}

// Runs a sweep given as text into a fresh results file on 2 threads and reads it back.
ResultTable run_into_table(const std::string& yaml, const std::string& name) {
  const std::string out = tmp(name);
  RunOptions o;
  o.threads = 2;
  run_sweep(spec_of(yaml), out, o);
  return read_results(out);
}

// 3 contexts x (full 1 + quest 4 budgets + chess 3x2 zipped/crossed) x 2 batches.
const std::string kSweep = std::string(kBase) + R"(axes:
  - workload.context_tokens: [8192, 32768, 131072]
  - quest.budget_tokens: {from: 256, to: 2048, factor: 2}
  - chess.rho_page: {from: 0.05, to: 0.2, points: 3, log: true}
  - zip:
      chess.rho_chunk: [0.1, 0.3]
      workload.output_tokens: [256, 1024]
  - workload.batch: [1, max]
)";
}  // namespace

TEST(SweepSpec, ExpandsCrossedZippedAndPolicyAxes) {
  const SweepSpec s = spec_of(kSweep);
  const PointSpace space(s);
  // full: 3 ctx x 2 (zip: output varies) x 2 batch = 12; quest: x4 = 48; chess: 3 x 3 x 2 x 2 = 36.
  EXPECT_EQ(space.size(), 12u + 48u + 36u);
  ASSERT_EQ(s.groups.size(), 5u);
  EXPECT_EQ(s.groups[1].axes[0].texts, (std::vector<std::string>{"256", "512", "1024", "2048"}));
  const auto& rho = s.groups[2].axes[0].numbers;
  ASSERT_EQ(rho.size(), 3u);
  EXPECT_NEAR(rho[1], 0.1, 1e-9);  // geometric mean of 0.05 and 0.2
  EXPECT_EQ(s.groups[4].axes[0].numbers, (std::vector<double>{1, 0}));  // max = 0
  // The first group varies slowest; the last fastest.
  Coords c;
  space.decode(0, c);
  EXPECT_EQ(c.policy, 0u);
  space.decode(1, c);
  EXPECT_EQ(c.digit[4], 1u);
  space.decode(12, c);
  EXPECT_EQ(c.policy, 1u);
}

TEST(SweepSpec, ContextFromTheScenarioWhenNotAnAxis) {
  const SweepSpec s = spec_of(std::string(kBase));
  EXPECT_EQ(PointSpace(s).size(), 3u);
  EXPECT_EQ(s.groups.front().axes.front().field, "workload.context_tokens");
}

TEST(SweepSpec, BadInputNamesFileLineFieldAndValue) {
  // Each case: the text after the base sweep, and the parts its error must contain.
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {"axes:\n  - chess.rho_pages: [0.1]\n", {"s.yaml:10", "rho_pages", "did you mean 'rho_page'"}},
      {"axes:\n  - chess.rho_page: [0.1, 1.5]\n",
       {"s.yaml:10: axes[0].chess.rho_page: value 1.5 is out of range; allowed: a number > 0 and <= 1"}},
      {"axes:\n  - workload.batch: [4, 2.5]\n", {"value 2.5 is not an integer"}},
      {"axes:\n  - workload.contxt_tokens: [1]\n", {"did you mean 'workload.context_tokens'"}},
      {"axes:\n  - hardware: [h100-sxm, h100-sxn]\n", {"s.yaml:10", "unknown hardware 'h100-sxn'"}},
      {"axes:\n  - zip:\n      workload.batch: [1, 2]\n      workload.output_tokens: [1, 2, 3]\n",
       {"has 3 values but workload.batch has 2"}},
      {"axes:\n  - quest.budget_tokens: {from: 10, to: 5, step: 1}\n", {"value 5 is below from (10)"}},
      {"axes:\n  - quest.budget_tokens: {from: 10, to: 50}\n", {"exactly one of step, points"}},
      {"axes:\n  - snapkv.budget_tokens: [64]\n", {"policy 'snapkv' is not among this sweep's policies"}},
      {"axes:\n  - workload.batch: [1]\n  - workload.batch: [2]\n", {"varied by two axes"}},
      {"axes:\n  - workload.kv_dtype: [bf16, fp4]\n", {"value 'fp4' is not allowed"}},
      {"pareto:\n  - {x: tpot_s, y: recall_mean}\n", {"needs a trace"}},
  };
  for (const auto& [text, parts] : cases) {
    const std::string m = error_of(std::string(kBase) + text);
    for (const std::string& part : parts) EXPECT_HAS(m, part);
  }
  EXPECT_HAS(error_of("policies: [fulll]\n"), "s.yaml:1: policies[0]: unknown policy 'fulll'");
}

TEST(SweepSpec, InvalidCombinationsAreInfeasibleRowsNotErrors) {
  // tensor_parallel 3 does not divide Llama 3.1 8B's heads: those points say why.
  const ResultTable t = run_into_table(std::string(kBase) + "axes:\n  - workload.tensor_parallel: [1, 3]\n", "combo.csv");
  ASSERT_EQ(t.rows.size(), 6u);
  EXPECT_HAS(t.rows[1], "invalid combination (workload.tensor_parallel=3)");
  EXPECT_HAS(t.rows[0], ",1,,");  // feasible, no reason
}

TEST(SweepRun, OutputDoesNotDependOnThreadsOrChunks) {
  const SweepSpec s = spec_of(kSweep);
  const std::string a = tmp("t1.csv"), b = tmp("t2.csv");
  RunOptions o;
  o.threads = 1;
  const RunStats sa = run_sweep(s, a, o);
  EXPECT_EQ(sa.evaluated, 96u);
  o.threads = 3;
  o.chunk_points = 5;
  run_sweep(s, b, o);
  EXPECT_EQ(test::read_text(a), test::read_text(b));
  EXPECT_EQ(test::read_text(pareto_path(a)), test::read_text(pareto_path(b)));
  // Every point once, in order, each with its key.
  const ResultTable t = read_results(a);
  ASSERT_EQ(t.rows.size(), 96u);
  for (size_t i = 0; i < t.rows.size(); ++i) EXPECT_EQ(row_point(t.rows[i], a), i);
}

TEST(SweepRun, ShardsMergedEqualTheUnshardedRunByteForByte) {
  const SweepSpec s = spec_of(kSweep);
  const std::string whole = tmp("whole.csv");
  RunOptions o;
  o.threads = 2;
  run_sweep(s, whole, o);
  std::vector<std::string> parts;
  for (uint64_t i = 0; i < 3; ++i) {
    parts.push_back(tmp("part" + std::to_string(i) + ".csv"));
    o.shard = {i, 3};
    const RunStats st = run_sweep(s, parts.back(), o);
    EXPECT_EQ(st.shard_points, 32u);
  }
  EXPECT_EQ(merge_results({parts[2], parts[0], parts[1]}), test::read_text(whole));
  // Through the CLI, with the Pareto fronts.
  const std::string merged = tmp("merged.csv");
  const auto r = test::run_kvsim("sweep merge -q -o '" + merged + "' '" + parts[1] + "' '" + parts[0] + "' '" + parts[2] + "'");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(test::read_text(merged), test::read_text(whole));
  EXPECT_EQ(test::read_text(pareto_path(merged)), test::read_text(pareto_path(whole)));
}

TEST(SweepRun, StoppedAndResumedEqualsUninterrupted) {
  const SweepSpec s = spec_of(kSweep);
  const std::string whole = tmp("r_whole.csv"), part = tmp("r_part.csv");
  RunOptions o;
  o.threads = 2;
  o.chunk_points = 7;
  run_sweep(s, whole, o);
  o.stop_after = 40;
  const RunStats first = run_sweep(s, part, o);
  EXPECT_TRUE(first.stopped);
  EXPECT_EQ(read_results(part).rows.size(), 40u);
  EXPECT_FALSE(std::filesystem::exists(pareto_path(part)));
  // A kill in the middle of a write leaves a partial line: the next run cuts it off.
  std::ofstream(part, std::ios::app) << "40,0123456789abcdef,quest,8192,2";
  o.stop_after = 0;
  const RunStats second = run_sweep(s, part, o);
  EXPECT_EQ(second.present, 40u);
  EXPECT_EQ(second.evaluated, 56u);
  EXPECT_FALSE(second.rewritten);
  EXPECT_EQ(test::read_text(part), test::read_text(whole));
  EXPECT_EQ(test::read_text(pareto_path(part)), test::read_text(pareto_path(whole)));
  // A third run finds everything present and changes nothing.
  const RunStats third = run_sweep(s, part, o);
  EXPECT_EQ(third.evaluated, 0u);
  EXPECT_EQ(test::read_text(part), test::read_text(whole));
}

TEST(SweepRun, ResumeAfterTheSweepGrewKeepsRowsAndRestoresOrder) {
  // Rows of the smaller sweep are kept by key; the larger sweep's file ends in canonical order.
  const std::string small = std::string(kBase) + "axes:\n  - workload.batch: [1, 8]\n";
  const std::string large = std::string(kBase) + "axes:\n  - workload.batch: [1, 4, 8]\n";
  const std::string out = tmp("grow.csv"), ref = tmp("grow_ref.csv");
  RunOptions o;
  o.threads = 2;
  run_sweep(spec_of(small), out, o);
  const RunStats st = run_sweep(spec_of(large), out, o);
  EXPECT_EQ(st.present, 6u);
  EXPECT_EQ(st.evaluated, 3u);
  EXPECT_TRUE(st.rewritten);
  run_sweep(spec_of(large), ref, o);
  EXPECT_EQ(test::read_text(out), test::read_text(ref));
}

TEST(SweepRun, ChangedColumnsAreRefused) {
  const std::string out = tmp("cols.csv");
  RunOptions o;
  run_sweep(spec_of(std::string(kBase)), out, o);
  try {
    run_sweep(spec_of(std::string(kBase) + "axes:\n  - workload.batch: [1, 8]\n"), out, o);
    FAIL() << "expected an error";
  } catch (const InputError& e) {
    EXPECT_HAS(std::string(e.what()), "other columns");
  }
}

TEST(SweepCli, KilledWithSigkillSeveralTimesThenResumedEqualsUninterrupted) {
  // A sweep slow enough to kill mid-way: simulated policies (a 32-layer DAG per point), one thread.
  const std::string spec = test::write_temp("kvsim_sweep_kill.yaml", std::string(R"(scenario:
  hardware: h100-sxm
  model: llama-3.1-8b
  workload: {context_tokens: 32768, output_tokens: 512, batch: max}
policies: [ctkvr, sekv]
axes:
  - workload.context_tokens: {from: 8192, to: 131072, points: 160}
  - workload.batch: {from: 1, to: 8, step: 1}
)"));
  const std::string whole = tmp("k_whole.csv"), part = tmp("k_part.csv");
  auto r = test::run_kvsim("sweep -q --threads 2 '" + spec + "' -o '" + whole + "'");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const std::string cmd = std::string("cd '") + KVSIM_SOURCE_DIR + "' && exec '" + KVSIM_BINARY + "' sweep -q --threads 1 '" +
                          spec + "' -o '" + part + "'";
  // Killed several times, each at a different moment (once the file has grown past a threshold, or
  // after 20 s at most; a run that finished first makes the later resumes no-ops), then resumed.
  size_t rows_before = 0;
  for (const uintmax_t grow : {4000u, 17000u, 9000u}) {
    std::error_code ec;
    const uintmax_t start = std::filesystem::exists(part, ec) ? std::filesystem::file_size(part, ec) : 0;
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      execl("/bin/sh", "sh", "-c", cmd.c_str(), (char*)nullptr);
      _exit(127);
    }
    const auto t0 = std::chrono::steady_clock::now();
    while (std::chrono::steady_clock::now() - t0 < std::chrono::seconds(20)) {
      if (std::filesystem::exists(part, ec) && std::filesystem::file_size(part, ec) > start + grow) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    rows_before = std::filesystem::exists(part) ? read_results(part).rows.size() : 0;
  }
  r = test::run_kvsim("sweep -q --threads 2 '" + spec + "' -o '" + part + "'");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  std::printf("[ note     ] killed with %zu of %zu rows on disk\n", rows_before, read_results(whole).rows.size());
  EXPECT_EQ(test::read_text(part), test::read_text(whole)) << rows_before << " rows before the resume";
  EXPECT_EQ(test::read_text(pareto_path(part)), test::read_text(pareto_path(whole)));
}

TEST(SweepCli, BadSweepFileExitsTwoNamingFileAndField) {
  const std::string spec = test::write_temp("kvsim_sweep_bad.yaml", std::string(kBase) + "axes:\n  - quest.budget_tokens: [64, -1]\n");
  const auto r = test::run_kvsim("sweep '" + spec + "' -o '" + tmp("bad.csv") + "'");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_HAS(r.out, "kvsim_sweep_bad.yaml:10: axes[0].quest.budget_tokens: value -1 is out of range");
  const std::string good = test::write_temp("kvsim_sweep_good.yaml", kBase);
  const auto s = test::run_kvsim("sweep '" + good + "' -o x.csv --shard 3/3");
  EXPECT_EQ(s.exit_code, 2);
  EXPECT_HAS(s.out, "--shard: value '3/3' is not a shard");
}

TEST(SweepPareto, KeepsOnlyNonDominatedRowsPerPolicyAndWorkload) {
  ResultTable t;
  t.header = "point,key,policy,workload.context_tokens,workload.batch,p.x,params,feasible,tpot_s,throughput_tok_s\n";
  t.rows = {"0,a,p,1,1,,,1,1,10", "1,a,p,1,2,,,1,2,30", "2,a,p,1,3,,,1,3,20", "3,a,p,1,4,,,1,2,25",
            "4,a,q,1,1,,,1,5,5",  "5,a,p,1,5,,,0,,",    "6,a,p,2,1,,,1,9,1"};
  const std::string csv = pareto_csv(t, {{"tpot_s", "throughput_tok_s"}}, "t.csv");
  // Rows 2 and 3 are dominated by row 1; row 6 (another context) is its own front though slower.
  EXPECT_EQ(csv,
            "front,point,key,policy,workload.context_tokens,workload.batch,p.x,params,feasible,tpot_s,throughput_tok_s\n"
            "tpot_s~throughput_tok_s,0,a,p,1,1,,,1,1,10\n"
            "tpot_s~throughput_tok_s,1,a,p,1,2,,,1,2,30\n"
            "tpot_s~throughput_tok_s,4,a,q,1,1,,,1,5,5\n"
            "tpot_s~throughput_tok_s,6,a,p,2,1,,,1,9,1\n");
}

namespace {
std::string tiny_trace() {
  static const std::string path = [] {
    const std::string p = std::string(::testing::TempDir()) + "kvsim_sweep_tiny.safetensors";
    const auto r = test::run_kvsim("trace gen --preset tiny -o '" + p + "'");
    EXPECT_EQ(r.exit_code, 0) << r.out;
    return p;
  }();
  return path;
}
}  // namespace

TEST(SweepTrace, QualityColumnsComeFromOneSharedReplayPerParameterSet) {
  const SweepSpec s = spec_of(std::string(kBase) + "axes:\n  - workload.context_tokens: [8192, 32768]\n"
                              "  - quest.budget_tokens: [64, 256, 1024]\ntrace:\n  path: " + tiny_trace() +
                              "\n  max_steps: 16\n");
  const std::string out = tmp("trace.csv");
  RunOptions o;
  o.threads = 2;
  const RunStats st = run_sweep(s, out, o);
  // full, chess and quest x 3 budgets: 5 parameter sets, whatever the contexts.
  EXPECT_EQ(st.replayed, 5u);
  EXPECT_EQ(st.evaluated, 2u * (1 + 3 + 1));
  const ResultTable t = read_results(out);
  const auto cols = split_line(t.header.substr(0, t.header.size() - 1));
  const size_t recall = size_t(std::find(cols.begin(), cols.end(), "recall_mean") - cols.begin());
  ASSERT_LT(recall, cols.size());
  std::vector<double> quest;
  for (const std::string& r : t.rows) {
    const auto f = split_line(r);
    ASSERT_FALSE(f[recall].empty()) << r;
    if (f[2] == "full") {
      EXPECT_NEAR(std::stod(f[recall]), 1.0, 1e-6);
    }
    if (f[2] == "quest" && f[3] == "8192") quest.push_back(std::stod(f[recall]));
  }
  ASSERT_EQ(quest.size(), 3u);
  EXPECT_LT(quest[0], quest[2]);  // a larger page budget keeps more attention mass
  // The default fronts with a trace: recall against TPOT and throughput.
  EXPECT_HAS(test::read_text(pareto_path(out)), "tpot_s~recall_mean,");
}

TEST(TargetPlanCli, SearchEqualsExhaustiveOnATrace) {
  // Quality from real replays: the bisection over quest's budget finds what trying every budget finds.
  const std::string common = "plan --context 32768 --policy quest --policy streaming --target-tpot 8 --min-recall 0.9 "
                             "--trace-max-steps 16 --format json --trace '" + tiny_trace() + "'";
  const auto a = test::run_kvsim(common);
  const auto b = test::run_kvsim(common + " --exhaustive");
  ASSERT_EQ(a.exit_code, 0) << a.out;
  ASSERT_EQ(b.exit_code, 0) << b.out;
  const auto ja = nlohmann::json::parse(a.out), jb = nlohmann::json::parse(b.out);
  EXPECT_EQ(ja["schema"], "kvsim.target_plan/1");
  ASSERT_EQ(ja["answers"].size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const auto &x = ja["answers"][i], &y = jb["answers"][i];
    ASSERT_EQ(x["feasible"], y["feasible"]) << x.dump() << y.dump();
    if (!x["feasible"].get<bool>()) continue;
    EXPECT_EQ(x["params"], y["params"]);
    EXPECT_EQ(x["batch"], y["batch"]);
    EXPECT_LT(x["search"]["quality_evaluations"].get<int>(), y["search"]["quality_evaluations"].get<int>());
    EXPECT_GE(x["quality"]["recall"].get<double>(), 0.9);
  }
}

TEST(SweepSpec, LibrarySweepsLoad) {
  for (const char* name : {"budgets", "speed"}) {
    const SweepSpec s = load_sweep_file(library_dir() + "/sweeps/" + name + ".yaml");
    EXPECT_GT(PointSpace(s).size(), 1000u) << name;
  }
  EXPECT_EQ(PointSpace(load_sweep_file(library_dir() + "/sweeps/budgets.yaml")).size(), 1722u);
  EXPECT_EQ(PointSpace(load_sweep_file(library_dir() + "/sweeps/speed.yaml")).size(), 45568u);
}

TEST(SweepSpec, LibraryKeysAreAxesCheckedByTheLibraryLoader) {
  const std::string axes = "axes:\n  - hardware: [h100-sxm, h200]\n  - host.dram.bandwidth_gbs: [200, 400]\n";
  const ResultTable t = run_into_table(std::string(kBase) + axes, "libkeys.csv");
  ASSERT_EQ(t.rows.size(), 12u);
  // full keeps its KV in HBM: host DRAM bandwidth changes nothing; the GPU does.
  const auto f = [&](size_t i) { return split_line(t.rows[i]); };
  const auto cols = split_line(t.header.substr(0, t.header.size() - 1));
  const size_t tpot = size_t(std::find(cols.begin(), cols.end(), "tpot_s") - cols.begin());
  ASSERT_LT(tpot, cols.size());
  EXPECT_EQ(f(0)[tpot], f(1)[tpot]);
  EXPECT_NE(f(0)[tpot], f(2)[tpot]);
  std::string m = error_of(std::string(kBase) + "axes:\n  - hardware.memory.bandwith_gbs: [3000]\n");
  EXPECT_HAS(m, "s.yaml:10: hardware.memory.bandwith_gbs: value 3000 is not accepted");
  EXPECT_HAS(m, "did you mean 'bandwidth_gbs'");
  m = error_of(std::string(kBase) + "axes:\n  - hardware.memory.bandwidth_gbs: [3000, -5]\n");
  EXPECT_HAS(m, "value -5 is not accepted");
}

TEST(SweepTrace, QualityCacheFileIsReusedAcrossRuns) {
  const std::string cache = tmp("quality_cache.json");
  std::string yaml = std::string(kBase) + "axes:\n  - quest.budget_tokens: [64, 512]\ntrace:\n  path: " + tiny_trace() +
                     "\n  max_steps: 8\n  cache: " + cache + "\n";
  const std::string policies = "policies: [full, quest, chess]";
  yaml.replace(yaml.find(policies), policies.size(), "policies: [quest]");
  const SweepSpec s = spec_of(yaml);
  const std::string a = tmp("qc_a.csv"), b = tmp("qc_b.csv");
  RunOptions o;
  const RunStats first = run_sweep(s, a, o);
  EXPECT_EQ(first.replayed, 2u);
  EXPECT_TRUE(std::filesystem::exists(cache));
  const RunStats second = run_sweep(s, b, o);  // a new results file: every point evaluated again
  EXPECT_EQ(second.evaluated, first.evaluated);
  EXPECT_EQ(second.replayed, 0u);              // but every quality comes from the cache file
  EXPECT_EQ(test::read_text(a), test::read_text(b));
}
