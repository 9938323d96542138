// The kvsim binary end to end: output formats, exit codes, and no partial files on error.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>
#include <nlohmann/json.hpp>

#include "test_util.hpp"

using namespace kvsim;

// Issue 43 item 5's CLI side: the workload's TP and dtypes as plan options, checked as the file's fields.
TEST(Cli, PlanTakesTensorParallelAndDtypes) {
  const auto j = test::run_kvsim("plan --policy full --context 32768 --batch 1 --tensor-parallel 2 --weight-dtype fp8 --kv-dtype fp8 --format json");
  ASSERT_EQ(j.exit_code, 0) << j.out;
  const auto plan = nlohmann::json::parse(j.out);
  EXPECT_EQ(plan["workload"]["tensor_parallel"], 2);
  EXPECT_EQ(plan["workload"]["weight_dtype"], "fp8");
  EXPECT_EQ(plan["workload"]["kv_dtype"], "fp8");
  const auto bad = test::run_kvsim("plan --tensor-parallel 3");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.out.find("command line: workload.tensor_parallel: value 3 must divide"), std::string::npos) << bad.out;
  const auto dt = test::run_kvsim("plan --kv-dtype int3");
  EXPECT_EQ(dt.exit_code, 2);
  EXPECT_NE(dt.out.find("command line: workload.kv_dtype:"), std::string::npos) << dt.out;
}

// Issue 43 item 2: the default plan reads at a glance — one screen (at most 30 lines of at most 120
// columns): the table, one line per policy with its bottleneck, range and flags counted, a legend said
// once. --detail adds, under each policy, what the glance counts.
TEST(Cli, DefaultPlanFitsOneScreenAndDetailAddsEveryPhase) {
  const auto r = test::run_kvsim("plan");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("llama-3.1-8b"), std::string::npos);
  EXPECT_NE(r.out.find("context 131072"), std::string::npos);
  std::vector<std::string> lines;
  std::istringstream in(r.out);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  EXPECT_LE(lines.size(), 30u) << r.out;
  for (const auto& line : lines) EXPECT_LE(line.size(), 120u) << line;
  EXPECT_EQ(r.out.find("decode step:"), std::string::npos) << r.out;  // per-phase lines only with --detail
  const auto d = test::run_kvsim("plan --detail");
  EXPECT_EQ(d.exit_code, 0) << d.out;
  for (const std::string policy : {"full", "streaming", "snapkv", "quest", "chess", "sentencekv", "chunkkv", "sekv", "ctkvr"}) {
    // Each policy: one glance line by default ("  name  bound: phase N% ..."), its phases with --detail.
    size_t glance = 0;
    for (const auto& line : lines)
      if (line.rfind("  " + policy + " ", 0) == 0 && line.find(": ") != std::string::npos && line.find('%') != std::string::npos)
        ++glance;
    EXPECT_EQ(glance, 1u) << policy << "\n" << r.out;
    const size_t row = d.out.find("\n  " + policy + " ");
    ASSERT_NE(row, std::string::npos) << policy;
    size_t next = d.out.find('\n', row + 1);  // the next policy's row: two spaces, then a name
    while (next != std::string::npos && !(d.out.compare(next, 3, "\n  ") == 0 && next + 3 < d.out.size() &&
                                          d.out[next + 3] != ' '))
      next = d.out.find('\n', next + 1);
    const std::string block = d.out.substr(row, next == std::string::npos ? std::string::npos : next - row);
    for (const char* what : {"    80% range (docs/uncertainty.md): TPOT ", "    decode step: ", "    roofline bound: TPOT "})
      EXPECT_NE(block.find(what), std::string::npos) << policy << " lacks '" << what << "'\n" << block;
  }
  // The legend says each flag once; the detail needs none.
  for (const char* flag : {"extrapolated: ", "unmeasured: ", "kernel model: ", "--detail: "}) {
    EXPECT_NE(r.out.find(flag), std::string::npos) << flag;
    EXPECT_EQ(d.out.find(std::string("\n") + flag), std::string::npos) << flag;
  }
  EXPECT_NE(d.out.find("unverified constants in force (no primary source; the file's comment says why): "), std::string::npos);
}

TEST(Cli, JsonFollowsTheSchema) {
  const auto r = test::run_kvsim("plan scenarios/example.yaml --format json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["schema"], "kvsim.plan/1");
  ASSERT_EQ(j["results"].size(), 2u);
  for (const auto& e : j["results"]) {
    for (const char* k : {"policy", "params", "context_tokens", "batch", "feasible", "reason", "tpot_ms", "ttft_ms",
                          "throughput_tok_s", "memory", "phases"})
      EXPECT_TRUE(e.contains(k)) << k;
    for (const char* k : {"hbm_bytes", "dram_bytes", "kv_hbm_bytes", "kv_dram_bytes", "max_batch"})
      EXPECT_TRUE(e["memory"].contains(k)) << k;
    ASSERT_TRUE(e["feasible"].get<bool>());
    ASSERT_FALSE(e["phases"].empty());
    for (const auto& p : e["phases"]) {
      for (const char* k : {"name", "device", "time_ms", "bound", "flops", "hbm_bytes", "dram_bytes", "h2d_bytes", "d2h_bytes"})
        EXPECT_TRUE(p.contains(k)) << k;
      const std::string dev = p["device"];
      EXPECT_TRUE(dev == "gpu" || dev == "cpu" || dev == "pcie") << dev;
    }
    // Throughput per GPU is batch / TPOT.
    EXPECT_NEAR(e["throughput_tok_s"].get<double>(), e["batch"].get<double>() / (e["tpot_ms"].get<double>() / 1e3), 1e-6);
  }
  EXPECT_EQ(j["results"][0]["context_tokens"], 16384);
  EXPECT_GT(j["results"][0]["batch"].get<int>(), j["results"][1]["batch"].get<int>());
}

// The table's numeric columns are the JSON's numbers at the table's precision: batch, max batch, TPOT ms,
// TTFT ms, tok/s.
TEST(Cli, TheTablesColumnsAreTheJsonsNumbers) {
  const auto t = test::run_kvsim("plan scenarios/example.yaml");
  const auto j = test::run_kvsim("plan scenarios/example.yaml --format json");
  ASSERT_EQ(t.exit_code, 0) << t.out;
  ASSERT_EQ(j.exit_code, 0) << j.out;
  // The policy rows, in order: a name, then five numbers.
  struct Row {
    std::string name, line;
    long long batch = 0, max_batch = 0;
    double tpot = 0, ttft = 0, tok_s = 0;
  };
  std::vector<Row> rows;
  std::istringstream lines(t.out);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream cells(line);
    Row r;
    r.line = line;
    if (cells >> r.name >> r.batch >> r.max_batch >> r.tpot >> r.ttft >> r.tok_s) rows.push_back(r);
  }
  const auto results = nlohmann::json::parse(j.out)["results"];
  ASSERT_EQ(rows.size(), results.size()) << t.out;
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& e = results[i];
    const Row& r = rows[i];
    EXPECT_EQ(r.name, e["policy"].get<std::string>()) << r.line;
    EXPECT_EQ(r.batch, e["batch"].get<long long>()) << r.line;
    EXPECT_EQ(r.max_batch, e["memory"]["max_batch"].get<long long>()) << r.line;
    EXPECT_NEAR(r.tpot, e["tpot_ms"].get<double>(), 0.0005 + 1e-9) << r.line;
    EXPECT_NEAR(r.ttft, e["ttft_ms"].get<double>(), 0.05 + 1e-9) << r.line;
    EXPECT_NEAR(r.tok_s, e["throughput_tok_s"].get<double>(), 0.05 + 1e-9) << r.line;
  }
}

TEST(Cli, CsvHasAHeaderAndOneRowPerResult) {
  const auto r = test::run_kvsim("plan scenarios/example.yaml --format csv --batch 2");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(r.out.rfind("policy,params,context_tokens", 0), 0u);
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 3);
}

// Issue 18: next to each policy at its own max batch, the same policy at full KV's batch (the seeds
// compare at equal batch), and the tensor-parallel degree in the headline of every comparison.
TEST(Cli, PlanComparesAtFullKvBatchAndStatesTp) {
  const std::string path = test::write_temp("tp2.yaml",
                                            "hardware: h100-sxm\nmodel: llama-3.1-8b\nworkload:\n"
                                            "  context_tokens: 131072\n  output_tokens: 1024\n  batch: max\n"
                                            "  tensor_parallel: 2\npolicies: [full, ctkvr]\n");
  const auto t = test::run_kvsim("plan " + path + " --detail");
  ASSERT_EQ(t.exit_code, 0) << t.out;
  EXPECT_NE(t.out.find(", TP 2, weights"), std::string::npos) << t.out;                     // first line
  EXPECT_NE(t.out.find("context 131072 + 1024 output tokens, TP 2 ("), std::string::npos) << t.out;  // per context
  EXPECT_NE(t.out.find("at full KV's batch "), std::string::npos) << t.out;
  EXPECT_NE(t.out.find(" (TP 2): TPOT "), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("MiB per sequence per layer"), std::string::npos) << t.out;
  const auto r = test::run_kvsim("plan " + path + " --format json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["results"].size(), 2u);
  const auto& full = j["results"][0];
  const auto& ct = j["results"][1];
  ASSERT_EQ(ct["policy"], "ctkvr");
  ASSERT_GT(ct["batch"].get<int>(), full["batch"].get<int>());
  const auto& a = ct["at_full_batch"];
  EXPECT_EQ(a["batch"], full["batch"]);
  ASSERT_TRUE(a["feasible"].get<bool>());
  EXPECT_NEAR(a["throughput_vs_full"].get<double>(), full["tpot_ms"].get<double>() / a["tpot_ms"].get<double>(), 1e-9);
  EXPECT_NEAR(a["throughput_tok_s"].get<double>(), a["batch"].get<double>() / (a["tpot_ms"].get<double>() / 1e3) / 2, 1e-6);
  // The two comparisons are different numbers (each at its own batch); by how much depends on the host
  // calibration of CTKVR's CPU phases (a few percent with the optimized host kernels' profile).
  EXPECT_GT(std::abs(ct["vs_full"]["throughput"].get<double>() / a["throughput_vs_full"].get<double>() - 1), 0.03);
  EXPECT_EQ(full["at_full_batch"]["throughput_vs_full"].get<double>(), 1.0);
  // The qcIVF in HBM, per GPU: with tp 2 each GPU holds 4 of the 8 KV heads and 16 of the 32 query heads,
  // C = 1024 (App. C.2): 4·1024·2560·4 + 16·1024·128·2 bytes per sequence and layer.
  EXPECT_EQ(ct["memory"]["index_hbm_bytes_per_seq_layer"].get<double>(), 4.0 * 1024 * 2560 * 4 + 16.0 * 1024 * 128 * 2);
  EXPECT_EQ(ct["memory"]["index_hbm_bytes"].get<double>(),
            ct["batch"].get<double>() * 32 * ct["memory"]["index_hbm_bytes_per_seq_layer"].get<double>());
  EXPECT_EQ(full["memory"]["index_hbm_bytes"].get<double>(), 0.0);
  const auto c = test::run_kvsim("plan " + path + " --format csv");
  ASSERT_EQ(c.exit_code, 0) << c.out;
  EXPECT_NE(c.out.find(",tensor_parallel,index_hbm_bytes,index_hbm_bytes_per_seq_layer,at_full_batch,"
                       "at_full_batch_tpot_ms,at_full_batch_throughput_tok_s,at_full_batch_throughput_vs_full,"
                          "tpot_ms_low,tpot_ms_high,ttft_ms_low,ttft_ms_high,throughput_tok_s_low,throughput_tok_s_high\n"),
            std::string::npos)
      << c.out;
}

TEST(Cli, OverridesAndInfeasibleBatch) {
  const auto r = test::run_kvsim("plan --model llama-3.2-3b --hardware a6000 --policy full --context 8192,65536 --batch 100 --format json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["hardware"], "a6000");
  EXPECT_EQ(j["host"], "xeon-w9-3495x");  // the A6000's default host
  const auto& far = j["results"][1];
  EXPECT_FALSE(far["feasible"].get<bool>());
  EXPECT_NE(far["reason"].get<std::string>().find("largest batch that fits"), std::string::npos);
  EXPECT_TRUE(far["tpot_ms"].is_null());
}

TEST(Cli, BadInputExitsNonzeroWithLocation) {
  const std::string path = test::write_temp("bad.yaml", "hardware: h100-sxm\nmodel: llama-3.1-8b\nworkload:\n  context_tokens: 1000\n  batch: -1\n");
  const auto r = test::run_kvsim("plan " + path);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.out.find(path + ":5: workload.batch: value -1 is out of range"), std::string::npos) << r.out;
  const auto missing = test::run_kvsim("plan /nonexistent/s.yaml");
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.out.find("cannot open file"), std::string::npos) << missing.out;
  const auto badopt = test::run_kvsim("plan --format xml");
  EXPECT_NE(badopt.exit_code, 0);
  const auto badset = test::run_kvsim("plan --set full.x=1");
  EXPECT_EQ(badset.exit_code, 2);
  EXPECT_NE(badset.out.find("command line: --set: policy 'full' has no parameter 'x'"), std::string::npos) << badset.out;
}

TEST(Cli, OutputFileIsWrittenWholeOrNotAtAll) {
  namespace fs = std::filesystem;
  const std::string out = std::string(::testing::TempDir()) + "plan_out.json";
  fs::remove(out);
  const auto bad = test::run_kvsim("plan --batch 0 -o " + out);
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_FALSE(fs::exists(out)) << "an error must not leave an output file";
  const auto good = test::run_kvsim("plan --format json -o " + out);
  ASSERT_EQ(good.exit_code, 0) << good.out;
  std::ifstream in(out);
  EXPECT_TRUE(nlohmann::json::parse(in).contains("results"));
  // Only this file's temporaries: other tests run in parallel and write their own.
  for (const auto& e : fs::directory_iterator(fs::path(out).parent_path()))
    EXPECT_NE(e.path().filename().string().rfind("plan_out.json.tmp.", 0), 0u) << "temporary file left behind: " << e.path();
}

TEST(Cli, LibraryCommands) {
  auto r = test::run_kvsim("hardware list");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("h100-sxm\n"), std::string::npos);
  r = test::run_kvsim("model show llama-3-8b --format json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_DOUBLE_EQ(nlohmann::json::parse(r.out)["kv_bytes_per_token"].get<double>(), 131072.0);
  r = test::run_kvsim("host show xeon-w9-3495x");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  r = test::run_kvsim("hardware show h100sxm");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.out.find("did you mean 'h100-sxm'"), std::string::npos) << r.out;
  r = test::run_kvsim("policy list");
  EXPECT_NE(r.out.find("full"), std::string::npos);
}

// Every bad-input class of the scenario format, through the binary: exit status 2, one line naming
// the file, line and field, and nothing on standard output.
TEST(Cli, EveryBadInputClassExitsTwoWithItsMessage) {
  const std::string good =
      "hardware: h100-sxm\nmodel: llama-3.1-8b\nworkload:\n  context_tokens: 4096\n  output_tokens: 128\n  batch: max\n";
  struct Case {
    std::string from, to, expect;
  };
  const std::vector<Case> cases = {
      {"output_tokens", "outptu_tokens", ":5: workload.outptu_tokens: unknown key (did you mean 'output_tokens'?)"},
      {"batch: max", "batch: 0", ":6: workload.batch: value 0 is out of range"},
      {"batch: max", "batch: many", ":6: workload.batch: value 'many' is not a number"},
      {"context_tokens: 4096", "context_tokens: 200000", ":4: workload.context_tokens: value 200000 exceeds the max_context"},
      {"hardware: h100-sxm", "hardware: h100-smx", ":1: hardware: unknown hardware 'h100-smx' (did you mean 'h100-sxm'?)"},
      {"model: llama-3.1-8b", "model: llama3.1-8b", ":2: model: unknown model 'llama3.1-8b' (did you mean 'llama-3.1-8b'?)"},
      {"batch: max", "batch: max\npolicies: [ful]", ":7: policies[0]: unknown policy 'ful' (did you mean 'full'?)"},
      {"hardware: h100-sxm",
       "hardware: {name: x, architecture: hopper, memory: {capacity_gib: 80, bandwidth_gbs: -1}}",
       ":1: hardware.memory.bandwidth_gbs: value -1 is out of range; allowed: > 0"},
  };
  int i = 0;
  for (const Case& c : cases) {
    std::string y = good;
    y.replace(y.find(c.from), c.from.size(), c.to);
    const std::string path = test::write_temp("bad_" + std::to_string(i++) + ".yaml", y);
    const auto r = test::run_kvsim("plan " + path + " --format json");
    EXPECT_EQ(r.exit_code, 2) << y;
    EXPECT_NE(r.out.find("kvsim: error: " + path + c.expect), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("\"schema\""), std::string::npos) << "no partial output on error";
  }
}

// --timeline writes a trace-event file whose slices on each resource track cover the decode step.
TEST(Cli, TimelineIsAChromeTraceOfTheDecodeStep) {
  const std::string path = std::string(::testing::TempDir()) + "timeline.json";
  std::filesystem::remove(path);
  const auto r = test::run_kvsim("plan scenarios/example.yaml --batch 1 --format json --timeline " + path);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto plan = nlohmann::json::parse(r.out);
  std::ifstream in(path);
  const auto trace = nlohmann::json::parse(in);
  ASSERT_TRUE(trace.contains("traceEvents"));
  // Process 1 is the first result; its phases run back to back, so the last slice ends at TPOT.
  double end_us = 0;
  int slices = 0;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] != "X" || e["pid"] != 1) continue;
    ++slices;
    end_us = std::max(end_us, e["ts"].get<double>() + e["dur"].get<double>());
  }
  EXPECT_GT(slices, 6);
  // The attention slice on the HBM track runs HBM at full rate (it is HBM-bound at batch 1).
  bool saw = false;
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] == "X" && e["pid"] == 1 && e["name"] == "attention" && e["tid"] == 4) {
      EXPECT_NEAR(e["args"]["utilization"].get<double>(), 1.0, 1e-9);
      saw = true;
    }
  EXPECT_TRUE(saw);
  EXPECT_NEAR(end_us / 1e3, plan["results"][0]["tpot_ms"].get<double>(), 1e-6);
}

// `kvsim ui` hands over to python -m kvsim.ui (docs/ui.md): its --help is the Python program's, which
// names the address it binds by default. Skips where the Python module was not built.
TEST(Cli, UiHandsOverToThePythonPlanner) {
  if (!std::filesystem::exists(std::filesystem::path(KVSIM_BINARY).parent_path() / "python" / "kvsim" / "ui.py"))
    GTEST_SKIP() << "the Python module is not built";
  const auto r = test::run_kvsim("ui --help");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("python -m kvsim.ui"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("default 127.0.0.1"), std::string::npos) << r.out;
}
