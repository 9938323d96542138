// Crash safety of outputs (issue 10): a kvsim process killed with SIGKILL at any moment leaves either no
// file at the output path or the complete previous one, never a truncated file, because every output is
// written to PATH.tmp.<pid> and renamed into place (core/atomic_file.hpp, SafetensorsWriter). The kill
// moments vary; the assertion holds whatever moment the kill lands on, so the test has no timing in
// its verdict. (Resuming a killed `kvsim sweep` is the sweep command's own test.)
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "core/error.hpp"
#include "tests/test_util.hpp"
#include "sweep/result_store.hpp"
#include "traces/format/trace_file.hpp"

namespace kvsim {
namespace {

namespace fs = std::filesystem;

TEST(CrashSafety, SigkillDuringTraceGenNeverLeavesAPartialFile) {
  const fs::path dir = fs::path(::testing::TempDir()) / "kvsim_crash_safety";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string out = (dir / "trace.safetensors").string();
  // The first four kills start from no file; the last from a finished one, which must survive intact.
  for (const char* delay : {"0.05", "0.2", "0.5", "1.0", "finish", "0.3"}) {
    if (std::string(delay) == "finish") {
      ASSERT_EQ(test::run_kvsim("trace gen --preset tiny -o '" + out + "'").exit_code, 0);
      continue;
    }
    // The needle preset writes ~390 MiB, so most kills land mid-write.
    const std::string cmd = "cd '" + std::string(KVSIM_SOURCE_DIR) + "' && ('" + KVSIM_BINARY +
                            "' trace gen --preset needle -o '" + out + "' >/dev/null 2>&1 & pid=$!; sleep " + delay +
                            "; kill -9 $pid 2>/dev/null; wait $pid 2>/dev/null; true)";
    ASSERT_EQ(std::system(cmd.c_str()), 0);
    if (fs::exists(out)) {
      // Only a finished write is ever renamed into place: it must open and validate completely.
      std::unique_ptr<TraceFile> t;
      EXPECT_NO_THROW(t = TraceFile::open(out)) << "killed after " << delay << " s";
      if (t) { EXPECT_NO_THROW(t->check_finite_layer(0)); }
    }
    // Whatever the kill left behind is only ever a temporary file beside the output.
    for (const auto& e : fs::directory_iterator(dir)) {
      const std::string name = e.path().filename().string();
      EXPECT_TRUE(name == "trace.safetensors" || name.rfind("trace.safetensors.tmp.", 0) == 0) << name;
    }
  }
  ASSERT_TRUE(fs::exists(out));
  EXPECT_EQ(TraceFile::open(out)->tokens_count(), 2048) << "the finished tiny trace was replaced by a killed write";
  fs::remove_all(dir);
}

// The outputs of one "job" (a sweep, a trace and a serving run, one after another in one shell), in the
// state a finished job leaves them.
struct JobOutputs {
  std::string results, pareto, trace, serve_csv, serve_json;
};
const char* const kOutputNames[] = {"sweep.csv", "sweep.pareto.csv", "trace.safetensors", "serve.csv", "serve.json"};

std::string read_or_empty(const fs::path& p) { return fs::exists(p) ? test::read_text(p.string()) : std::string(); }
JobOutputs read_outputs(const fs::path& dir) {
  return {read_or_empty(dir / "sweep.csv"), read_or_empty(dir / "sweep.pareto.csv"),
          read_or_empty(dir / "trace.safetensors"), read_or_empty(dir / "serve.csv"), read_or_empty(dir / "serve.json")};
}

// The job's shell command. The old and the new job differ in `spec`, `tokens` and `requests`, so they write different contents to the
// same five paths (another sweep range with the same columns, another trace length and request count).
std::string job_command(const fs::path& dir, const std::string& spec, int tokens, int requests) {
  const std::string kv = std::string("'") + KVSIM_BINARY + "'", d = dir.string();
  return "cd '" + std::string(KVSIM_SOURCE_DIR) + "' && " + kv + " sweep -q --threads 1 '" + spec + "' -o '" + d +
         "/sweep.csv' && " + kv + " trace gen --preset tiny --tokens " + std::to_string(tokens) + " -o '" + d +
         "/trace.safetensors' >/dev/null 2>&1 && " + kv + " serve --policy full --requests " + std::to_string(requests) +
         " --format json -o '" + d + "/serve.json' --requests-csv '" + d + "/serve.csv' >/dev/null 2>&1";
}

// Starts `cmd` in a process group of its own; returns the group's id (its leader's pid).
pid_t start_group(const std::string& cmd) {
  const pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    execl("/bin/sh", "sh", "-c", cmd.c_str(), (char*)nullptr);
    _exit(127);
  }
  if (pid > 0) setpgid(pid, pid);  // also here, so the kill below cannot race the child's own call
  return pid;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

// The documented state of the sweep's results journal at a kill (docs/robustness.md, "Crash safety and
// durability"): the header, then complete rows each of which is a row of the old file or of the new
// finished one, then at most one partial line (no newline) that is the start of a new row.
void expect_journal(const std::string& got, const JobOutputs& old_o, const JobOutputs& new_o, int kill) {
  if (got == old_o.results || got == new_o.results) return;
  const std::vector<std::string> old_rows = lines_of(old_o.results), new_rows = lines_of(new_o.results);
  ASSERT_FALSE(new_rows.empty());
  ASSERT_EQ(got.rfind(new_rows[0] + "\n", 0), 0u) << "kill " << kill << ": the journal lost its header";
  const std::set<std::string> known(old_rows.begin(), old_rows.end()), fresh(new_rows.begin(), new_rows.end());
  size_t pos = new_rows[0].size() + 1;
  while (pos < got.size()) {
    const size_t nl = got.find('\n', pos);
    if (nl == std::string::npos) {  // the cut last line: the start of a row of the new run
      const std::string part = got.substr(pos);
      bool prefix = false;
      for (const std::string& r : new_rows) prefix = prefix || r.rfind(part, 0) == 0;
      EXPECT_TRUE(prefix) << "kill " << kill << ": partial line '" << part << "' is not the start of a new row";
      return;
    }
    const std::string row = got.substr(pos, nl - pos);
    EXPECT_TRUE(known.count(row) || fresh.count(row)) << "kill " << kill << ": journal row '" << row << "' is neither old nor new";
    pos = nl + 1;
  }
}

TEST(CrashSafety, RandomSigkillsLeaveEveryOutputOldOrNewComplete) {
  const fs::path root = fs::path(::testing::TempDir()) / "kvsim_crash_random";
  fs::remove_all(root);
  const fs::path old_dir = root / "old", new_dir = root / "new", work = root / "work";
  for (const fs::path& d : {old_dir, new_dir, work}) fs::create_directories(d);
  const std::string head = "scenario:\n  hardware: h100-sxm\n  model: llama-3.1-8b\n"
                           "  workload: {context_tokens: 32768, output_tokens: 512, batch: max}\n"
                           "policies: [ctkvr, sekv]\naxes:\n  - workload.batch: {from: 1, to: 8, step: 1}\n";
  const std::string old_spec = test::write_temp("kvsim_crash_old.yaml",
                                                head + "  - workload.context_tokens: {from: 8192, to: 131072, points: 40}\n");
  const std::string new_spec = test::write_temp("kvsim_crash_new.yaml",
                                                head + "  - workload.context_tokens: {from: 8192, to: 131072, points: 120}\n");
  // Both reference jobs write to `work` itself (a trace records the path it was written to), then their
  // outputs are kept aside.
  const std::string cmd = job_command(work, new_spec, 8192, 5000);
  const auto keep = [&](const fs::path& to) {
    for (const char* n : kOutputNames) fs::rename(work / n, to / n);
  };
  ASSERT_EQ(test::run_command(job_command(work, old_spec, 4096, 2000)).exit_code, 0);
  keep(old_dir);
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(test::run_command(cmd).exit_code, 0);
  // Only spreads the kill moments over the job; no verdict depends on timing.
  const double job_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  keep(new_dir);
  const JobOutputs old_o = read_outputs(old_dir), new_o = read_outputs(new_dir);
  ASSERT_NE(old_o.results, new_o.results);
  ASSERT_NE(old_o.trace, new_o.trace);
  ASSERT_NE(old_o.serve_csv, new_o.serve_csv);

  std::mt19937 rng(31);
  std::uniform_real_distribution<double> when(0.0, 1.1 * job_s);
  constexpr int kKills = 40;
  int landed_mid_job = 0;
  for (int kill_no = 0; kill_no < kKills; ++kill_no) {
    // Every kill starts from the old job's complete outputs.
    for (const auto& e : fs::directory_iterator(work)) fs::remove(e.path());
    for (const char* n : kOutputNames) fs::copy_file(old_dir / n, work / n);
    const pid_t pg = start_group(cmd);
    ASSERT_GT(pg, 0);
    std::this_thread::sleep_for(std::chrono::duration<double>(when(rng)));
    ::kill(-pg, SIGKILL);
    int status = 0;
    waitpid(pg, &status, 0);
    const JobOutputs got = read_outputs(work);
    landed_mid_job += got.serve_json != new_o.serve_json;
    // Renamed outputs: the old complete file or the new complete one, byte for byte.
    const auto old_or_new = [&](const std::string& g, const std::string& o, const std::string& n, const char* what) {
      EXPECT_TRUE(g == o || g == n) << "kill " << kill_no << ": " << what << " is neither the old nor the new file ("
                                    << g.size() << " bytes; old " << o.size() << ", new " << n.size() << ")";
    };
    old_or_new(got.pareto, old_o.pareto, new_o.pareto, "sweep.pareto.csv");
    old_or_new(got.trace, old_o.trace, new_o.trace, "trace.safetensors");
    old_or_new(got.serve_csv, old_o.serve_csv, new_o.serve_csv, "serve.csv");
    old_or_new(got.serve_json, old_o.serve_json, new_o.serve_json, "serve.json");
    expect_journal(got.results, old_o, new_o, kill_no);
    // Anything else is a temporary file a kill left beside an output.
    for (const auto& e : fs::directory_iterator(work)) {
      const std::string name = e.path().filename().string();
      EXPECT_TRUE(std::set<std::string>(std::begin(kOutputNames), std::end(kOutputNames)).count(name) ||
                  name.find(".tmp.") != std::string::npos)
          << name;
    }
  }
  // The last killed state resumed: the journal's cut line is discarded and every output is the new one.
  ASSERT_EQ(test::run_command(cmd).exit_code, 0);
  const JobOutputs resumed = read_outputs(work);
  EXPECT_EQ(resumed.results, new_o.results);
  EXPECT_EQ(resumed.pareto, new_o.pareto);
  EXPECT_EQ(resumed.trace, new_o.trace);
  EXPECT_EQ(resumed.serve_csv, new_o.serve_csv);
  std::printf("[ note     ] %d SIGKILLs over a %.2f s job, %d before it finished\n", kKills, job_s, landed_mid_job);
  fs::remove_all(root);
}

}  // namespace
}  // namespace kvsim
