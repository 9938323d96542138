// The Python writer (tools/capture/kvsim_trace.py, what hf_capture.py writes with) and the C++ reader
// agree: Python writes a small trace in each dtype plus the values it wrote, after rounding, and
// TraceFile must read back exactly those values.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>

#include "tests/test_util.hpp"
#include "traces/format/trace_file.hpp"

namespace kvsim {
namespace {

TEST(TracePython, WriterAndReaderAgreeInEveryDtype) {
  if (std::system("command -v python3 >/dev/null 2>&1") != 0) GTEST_SKIP() << "python3 not installed";
  const std::string dir = std::string(::testing::TempDir()) + "kvsim_pytrace";
  std::filesystem::remove_all(dir);
  const std::string cmd = "python3 '" + std::string(KVSIM_SOURCE_DIR) + "/tools/capture/test_kvsim_trace.py' '" + dir +
                          "' > '" + dir + ".log' 2>&1";
  const int rc = std::system(cmd.c_str());
  const std::string log = test::read_text(dir + ".log");
  ASSERT_EQ(rc, 0) << log;
  EXPECT_NE(log.find(" passed, 0 failed"), std::string::npos) << log;

  const nlohmann::json ex = nlohmann::json::parse(std::ifstream(dir + "/py_expected.json"));
  ASSERT_EQ(ex["files"].size(), 3u);
  const std::regex row_name(R"((keys|values|queries)_l(\d+)_h(\d+)_[ts](\d+))");
  for (const auto& [file, rows] : ex["files"].items()) {
    SCOPED_TRACE(file);
    const auto tr = TraceFile::open(dir + "/" + file);
    const int d = tr->head_dim();
    EXPECT_EQ(d, ex["head_dim"].get<int>());
    EXPECT_EQ(tr->meta().layers, ex["layers"].get<std::vector<int>>());
    EXPECT_EQ(tr->meta().kv_heads, ex["kv_heads"].get<std::vector<int>>());
    EXPECT_EQ(tr->meta().query_heads, ex["query_heads"].get<std::vector<int>>());
    EXPECT_EQ(tr->meta().prompt_tokens, ex["prompt_tokens"].get<int64_t>());
    EXPECT_EQ(tr->meta().sentence_starts, ex["sentence_starts"].get<std::vector<int64_t>>());
    EXPECT_EQ(tr->tokens().token_ids, ex["token_ids"].get<std::vector<int32_t>>());
    EXPECT_EQ(tr->tokens().query_positions, ex["query_positions"].get<std::vector<int64_t>>());
    EXPECT_EQ(tr->tokens().surprisal, ex["surprisal"].get<std::vector<float>>());
    EXPECT_EQ(tr->tokens().entropy, ex["entropy"].get<std::vector<float>>());
    EXPECT_EQ(tr->tokens().varentropy, ex["varentropy"].get<std::vector<float>>());
    int checked = 0;
    for (const auto& [name, want] : rows.items()) {
      std::smatch m;
      if (!std::regex_match(name, m, row_name)) continue;
      const int l = std::stoi(m[2]), h = std::stoi(m[3]);
      const int64_t r = std::stoll(m[4]);
      std::vector<float> got(static_cast<size_t>(d));
      if (m[1] == "keys") tr->keys(l, h, r, r + 1, got.data());
      else if (m[1] == "values") tr->values(l, h, r, r + 1, got.data());
      else tr->queries(l, h, r, r + 1, got.data());
      const auto w = want.get<std::vector<float>>();
      ASSERT_EQ(w.size(), got.size()) << name;
      for (int i = 0; i < d; ++i) {
        EXPECT_EQ(got[size_t(i)], w[size_t(i)]) << name << "[" << i << "]";  // exact: both are the rounded value
        EXPECT_EQ(std::signbit(got[size_t(i)]), std::signbit(w[size_t(i)])) << name << "[" << i << "]";
      }
      ++checked;
    }
    EXPECT_GE(checked, 4);
    tr->check_finite_all();
  }
}

}  // namespace
}  // namespace kvsim
