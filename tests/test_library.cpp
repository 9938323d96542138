// The hardware, host and model library: every file loads and validates, is named after its file, and
// every number in it carries its source.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>

#include "test_util.hpp"

using namespace kvsim;
namespace fs = std::filesystem;

TEST(Library, RequiredEntriesExist) {
  const auto gpus = library_names(LibraryKind::hardware);
  for (const char* n : {"h100-sxm", "h100-pcie", "h100-nvl", "h200", "h20", "a100-80g", "a100-40g", "a800", "a6000",
                        "a40", "l40s", "rtx4090", "v100-32g"})
    EXPECT_NE(std::find(gpus.begin(), gpus.end(), n), gpus.end()) << "missing hardware " << n;
  const auto hosts = library_names(LibraryKind::host);
  for (const char* n : {"sapphire-rapids-2s", "xeon-w9-3495x", "ci-2core"})
    EXPECT_NE(std::find(hosts.begin(), hosts.end(), n), hosts.end()) << "missing host " << n;
  const auto models = library_names(LibraryKind::model);
  for (const char* n : {"llama-3-8b", "llama-3.1-8b", "llama-3.2-3b", "mistral-7b", "qwen2-7b", "qwen2.5-14b",
                        "qwen3-8b", "yi-9b", "longchat-7b", "smollm2-135m"})
    EXPECT_NE(std::find(models.begin(), models.end(), n), models.end()) << "missing model " << n;
}

TEST(Library, EveryHardwareFileLoadsAndIsConsistent) {
  for (const auto& n : library_names(LibraryKind::hardware)) {
    SCOPED_TRACE(n);
    const GpuSpec g = test::gpu(n);
    EXPECT_EQ(g.name, n);
    EXPECT_GT(g.hbm_bandwidth, 0);
    // Tensor cores are faster than CUDA cores, and the pinned PCIe rate is below the link's raw rate.
    EXPECT_GT(g.tensor_fp16, g.fp32);
    const double raw_gen_gbs[] = {0, 0.25, 0.5, 0.985, 1.969, 3.938, 7.877, 15.125};  // GB/s per lane
    const double raw = raw_gen_gbs[g.pcie_generation] * g.pcie_lanes * 1e9;
    EXPECT_LE(g.h2d_pinned, raw);
    EXPECT_LE(g.d2h_pinned, raw);
    EXPECT_NO_THROW(test::host(g.default_host)) << "default_host must exist";
  }
}

TEST(Library, EveryHostAndModelFileLoads) {
  for (const auto& n : library_names(LibraryKind::host)) {
    SCOPED_TRACE(n);
    EXPECT_EQ(test::host(n).name, n);
  }
  for (const auto& n : library_names(LibraryKind::model)) {
    SCOPED_TRACE(n);
    const ModelConfig m = test::model(n);
    EXPECT_EQ(m.name, n);
    EXPECT_EQ(m.query_heads % m.kv_heads, 0);
  }
  for (const auto& n : library_names(LibraryKind::calibration)) {
    SCOPED_TRACE(n);
    EXPECT_NO_THROW(load_calibration_file(resolve(LibraryKind::calibration, n, "", 0, "")));
  }
}

// Every line that sets a number must say where it comes from, with one of the source kinds.
TEST(Library, EveryNumberCarriesItsSource) {
  const std::regex numeric_line(R"(^\s*[A-Za-z0-9_]+:\s*-?[0-9][0-9.eE+-]*\s*(#.*)?$)");
  // borrowed: a measurement on another GPU of the same architecture (issue 27: launch latencies).
  const std::regex sourced(R"(#.*\b(datasheet|measured|derived|estimate|paper|config|borrowed):)");
  for (const char* sub : {"hardware", "hosts", "models"}) {
    for (const auto& e : fs::directory_iterator(library_dir() + "/" + sub)) {
      std::ifstream in(e.path());
      std::string line;
      int no = 0;
      while (std::getline(in, line)) {
        ++no;
        if (std::regex_match(line, numeric_line)) {
          EXPECT_TRUE(std::regex_search(line, sourced)) << e.path().string() << ":" << no << ": " << line;
        }
      }
    }
  }
}
