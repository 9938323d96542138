// Crash safety of outputs (issue 10): a kvsim process killed with SIGKILL at any moment leaves either no
// file at the output path or the complete previous one, never a truncated file, because every output is
// written to PATH.tmp.<pid> and renamed into place (core/atomic_file.hpp, SafetensorsWriter). The kill
// moments vary; the assertion holds whatever moment the kill lands on, so the test has no timing in
// its verdict. (Resuming a killed `kvsim sweep` is the sweep command's own test.)
#include <filesystem>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "core/error.hpp"
#include "tests/test_util.hpp"
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
      if (t) EXPECT_NO_THROW(t->check_finite_layer(0));
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

}  // namespace
}  // namespace kvsim
