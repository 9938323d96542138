// Resource limits on untrusted input (core/input_limits.hpp) and extreme hardware numbers: each limit
// is checked before anything is allocated, and its error names the limit, the value and the
// environment variable that raises it; hardware and host numbers that are zero, negative, huge or not
// finite are rejected with the allowed range.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "core/error.hpp"
#include "model/hardware.hpp"
#include "model/host.hpp"
#include "core/input_limits.hpp"
#include "model/calibration.hpp"
#include "model/implementation.hpp"
#include "model/library.hpp"
#include "model/model_config.hpp"
#include "tests/gguf_writer.hpp"
#include "traces/llm/gguf.hpp"
#include "traces/format/safetensors.hpp"

namespace kvsim {
namespace {

// Sets an environment variable for one test and restores it after.
struct ScopedEnv {
  std::string name;
  ScopedEnv(const std::string& n, const std::string& value) : name(n) { setenv(n.c_str(), value.c_str(), 1); }
  ~ScopedEnv() { unsetenv(name.c_str()); }
};

std::string temp_file(const std::string& name, const std::string& bytes) {
  const std::string path = std::string(::testing::TempDir()) + "kvsim_limits_" + name;
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

// A valid safetensors file with two F32 scalars.
std::string two_scalars() {
  const std::string json = R"({"a":{"dtype":"F32","shape":[],"data_offsets":[0,4]},)"
                           R"("b":{"dtype":"F32","shape":[],"data_offsets":[4,8]}})";
  std::string bytes(8, '\0');
  uint64_t n = json.size();
  for (int i = 0; i < 8; ++i) bytes[i] = char((n >> (8 * i)) & 0xff);
  return bytes + json + std::string(8, '\0');
}

std::string safetensors_error(const std::string& path) {
  return error_of([&] {
    MappedFile f(path);
    parse_safetensors(f, path);
  });
}

TEST(InputLimits, DefaultsWithoutTheEnvironment) {
  EXPECT_EQ(input_limit(InputLimit::header_bytes), uint64_t(100) << 20);
  EXPECT_EQ(input_limit(InputLimit::tensors), uint64_t(1) << 20);
  EXPECT_STREQ(input_limit_variable(InputLimit::yaml_bytes), "KVSIM_MAX_YAML_BYTES");
  const std::string path = temp_file("two.safetensors", two_scalars());
  EXPECT_EQ(safetensors_error(path), "");
}

TEST(InputLimits, SafetensorsHeaderAndTensorCount) {
  const std::string path = temp_file("two.safetensors", two_scalars());
  {
    ScopedEnv e("KVSIM_MAX_HEADER_BYTES", "50");
    const std::string msg = safetensors_error(path);
    EXPECT_NE(msg.find("header length"), std::string::npos) << msg;
    EXPECT_NE(msg.find("exceeds the limit of 50 bytes"), std::string::npos) << msg;
    EXPECT_NE(msg.find("KVSIM_MAX_HEADER_BYTES"), std::string::npos) << msg;
  }
  {
    ScopedEnv e("KVSIM_MAX_TENSORS", "1");
    const std::string msg = safetensors_error(path);
    EXPECT_NE(msg.find("exceeds the limit of 1 tensors"), std::string::npos) << msg;
    EXPECT_NE(msg.find("KVSIM_MAX_TENSORS"), std::string::npos) << msg;
  }
  {
    ScopedEnv e("KVSIM_MAX_TENSOR_ELEMENTS", "0");  // not a valid limit: the variable itself is the error
    const std::string msg = safetensors_error(path);
    EXPECT_NE(msg.find("KVSIM_MAX_TENSOR_ELEMENTS: value '0' is not allowed; allowed: an integer > 0"), std::string::npos)
        << msg;
  }
}

TEST(InputLimits, SafetensorsElementsCheckedBeforeOffsets) {
  // 2^30 x 2^30 elements claimed by a file of a few bytes: refused on the shape, before any size math
  // on the data could matter.
  const std::string json = R"({"big":{"dtype":"F32","shape":[1073741824,1073741824],"data_offsets":[0,4]}})";
  std::string bytes(8, '\0');
  bytes[0] = char(json.size());
  const std::string path = temp_file("big.safetensors", bytes + json + std::string(4, '\0'));
  ScopedEnv e("KVSIM_MAX_TENSOR_ELEMENTS", "1000000");
  const std::string msg = safetensors_error(path);
  // Refused at the first dimension that takes the count past the limit.
  EXPECT_NE(msg.find("tensor 'big' shape [1073741824,1073741824]: element count 1073741824 exceeds the limit of "
                     "1000000 elements; set the environment variable KVSIM_MAX_TENSOR_ELEMENTS"),
            std::string::npos)
      << msg;
}

TEST(InputLimits, GgufCountsStringsAndElements) {
  test_support::GgufWriter w;
  w.kv_str("general.architecture", "llama");
  w.tensor("t", {32, 4}, 0, std::string(32 * 4 * 4, '\0'));
  const std::string bytes = w.bytes();
  auto gguf_error = [&] { return error_of([&] { llm::GgufFile f("x.gguf", bytes.data(), bytes.size()); }); };
  EXPECT_EQ(gguf_error(), "");
  {
    ScopedEnv e("KVSIM_MAX_STRING_BYTES", "8");
    EXPECT_NE(gguf_error().find("string length 20 exceeds the limit of 8 bytes; set the environment variable "
                                "KVSIM_MAX_STRING_BYTES to raise it"),
              std::string::npos)
        << gguf_error();
  }
  {
    ScopedEnv e("KVSIM_MAX_METADATA_KEYS", "0x10");
    EXPECT_NE(gguf_error().find("KVSIM_MAX_METADATA_KEYS: value '0x10' is not allowed"), std::string::npos) << gguf_error();
  }
  {
    ScopedEnv e("KVSIM_MAX_TENSOR_ELEMENTS", "100");
    EXPECT_NE(gguf_error().find("tensor 't': element count 128 exceeds the limit of 100 elements"), std::string::npos)
        << gguf_error();
  }
  {
    ScopedEnv e("KVSIM_MAX_TENSORS", "1");
    EXPECT_EQ(gguf_error(), "");  // exactly at the limit
  }
}

TEST(InputLimits, YamlFileSize) {
  const std::string path = resolve(LibraryKind::hardware, "h100-sxm", "", 0, "");
  ScopedEnv e("KVSIM_MAX_YAML_BYTES", "100");
  const std::string msg = error_of([&] { load_gpu_file(path); });
  EXPECT_NE(msg.find(path + ": file size "), std::string::npos) << msg;
  EXPECT_NE(msg.find("exceeds the limit of 100 bytes; set the environment variable KVSIM_MAX_YAML_BYTES"),
            std::string::npos)
      << msg;
  // A device named where a file was expected: reading stops at the limit instead of never ending.
  const std::string dev = error_of([&] { load_gpu_file("/dev/zero"); });
  EXPECT_NE(dev.find("/dev/zero: file size at least"), std::string::npos) << dev;
  EXPECT_NE(dev.find("KVSIM_MAX_YAML_BYTES"), std::string::npos) << dev;
}

// A library file with one field replaced, re-parsed from text so the error has a line.
template <class Load>
std::string error_with(LibraryKind kind, const std::string& name, const std::string& section, const std::string& key,
                       const std::string& value, Load load) {
  YAML::Node doc = load_yaml_file(resolve(kind, name, "", 0, ""));
  YAML::Node target = section.empty() ? doc : doc[section];
  target[key] = YAML::Load(value);
  return error_of([&] { load(YamlMap(load_yaml_string(YAML::Dump(doc), "edited.yaml"), "edited.yaml", "")); });
}

TEST(ExtremeHardware, ZeroNegativeHugeAndNonFiniteAreRejectedWithTheRange) {
  struct Case {
    const char *section, *key, *range;
  };
  // Every bounded number of a GPU file, its stated range the spec (a changed limit fails here).
  const Case gpu_cases[] = {{"memory", "bandwidth_gbs", "> 0 and <= 100000"},
                            {"memory", "capacity_gib", "> 0 and <= 4096"},
                            {"compute", "tensor_fp16_tflops", "> 0 and <= 100000"},
                            {"compute", "tensor_bf16_tflops", "> 0 and <= 100000"},
                            {"compute", "tensor_fp8_tflops", "> 0 and <= 100000"},
                            {"compute", "fp32_tflops", "> 0 and <= 100000"},
                            {"", "l2_mib", "> 0 and <= 100000"},
                            {"pcie", "h2d_pinned_gbs", "> 0 and <= 10000"},
                            {"pcie", "d2h_pinned_gbs", "> 0 and <= 10000"},
                            {"pcie", "generation", "1 .. 7"},
                            {"pcie", "lanes", "1 .. 32"},
                            {"nvlink", "bandwidth_gbs", "> 0 and <= 100000"},
                            {"", "sm_count", "1 .. 10000"}};
  for (const Case& c : gpu_cases)
    for (const char* v : {"0", "-1", "1e30", "1e999", ".nan", "nan", ".inf", "-inf"}) {
      const std::string msg = error_with(LibraryKind::hardware, "h100-sxm", c.section, c.key, v,
                                         [](YamlMap m) { load_gpu(m); });
      const std::string field = std::string(c.section) + (*c.section ? "." : "") + c.key;
      EXPECT_NE(msg.find("edited.yaml:"), std::string::npos) << msg;
      EXPECT_NE(msg.find(field), std::string::npos) << field << " = " << v << ": " << msg;
      EXPECT_NE(msg.find(std::string("allowed: ")), std::string::npos) << field << " = " << v << ": " << msg;
      EXPECT_NE(msg.find(c.range), std::string::npos) << field << " = " << v << ": " << msg;
    }
  const Case host_cases[] = {{"dram", "bandwidth_gbs", "> 0 and <= 100000"},
                             {"compute", "fp32_gflops", "> 0 and <= 100000000"},
                             {"", "cores", "1 .. 4096"}};
  for (const Case& c : host_cases)
    for (const char* v : {"0", "-5", "1e300", ".nan", "inf"}) {
      const std::string msg = error_with(LibraryKind::host, "ci-2core", c.section, c.key, v,
                                         [](YamlMap m) { load_host(m); });
      EXPECT_NE(msg.find(c.range), std::string::npos) << c.key << " = " << v << ": " << msg;
    }
  // Model shapes: out of range, and consistent field by field but not together.
  const Case model_cases[] = {{"", "layers", "1 .. 1024"},         {"", "hidden", "1 .. 1048576"},
                              {"", "query_heads", "1 .. 4096"},     {"", "kv_heads", "1 .. 4096"},
                              {"", "head_dim", "1 .. 4096"},        {"", "ffn_hidden", "1 .. 4194304"},
                              {"", "vocab", "1 .. 16777216"},       {"", "max_context", "1 .. 4294967296"},
                              {"", "rope_theta", "> 0 and <= 1e+12"}};
  for (const Case& c : model_cases)
    for (const char* v : {"0", "-3", "1e30", ".nan"}) {
      const std::string msg = error_with(LibraryKind::model, "llama-3.1-8b", "", c.key, v, [](YamlMap m) { load_model(m); });
      EXPECT_NE(msg.find(c.key), std::string::npos) << v << ": " << msg;
      EXPECT_NE(msg.find(c.range), std::string::npos) << c.key << " = " << v << ": " << msg;
    }
  const std::string msg = error_with(LibraryKind::model, "llama-3.1-8b", "", "kv_heads", "3", [](YamlMap m) { load_model(m); });
  EXPECT_NE(msg.find("kv_heads: value 3 must divide query_heads (32)"), std::string::npos) << msg;
  // An eager implementation profile's dispatch counts and times.
  const std::string eager =
      "dispatch: eager\nops_per_layer: 60\nkernels_per_layer: 39\nops_per_step: 36\nkernels_per_step: 16\n"
      "dispatch_us: 2.97\nloop_us: 100\n";
  const Case impl_cases[] = {{"", "ops_per_layer", "1 .. 100000"},
                             {"", "ops_per_step", "0 .. 100000"},
                             {"", "dispatch_us", "> 0 and <= 100000"},
                             {"", "loop_us", "0 .. 1000000"}};
  for (const Case& c : impl_cases)
    for (const char* v : {"-1", "1e30", ".nan"}) {
      YAML::Node doc = YAML::Load(eager);
      doc[c.key] = YAML::Load(v);
      const std::string m = error_of([&] { load_implementation(YamlMap(doc, "impl.yaml", "implementation")); });
      EXPECT_NE(m.find(std::string("implementation.") + c.key), std::string::npos) << c.key << " = " << v << ": " << m;
      EXPECT_NE(m.find(c.range), std::string::npos) << c.key << " = " << v << ": " << m;
    }
  // A calibration's host-thread costs (measured by `kvsim validate --device cpu`).
  const Case thread_cases[] = {{"host_threads", "call_us", "0 .. 1000000"},
                               {"host_threads", "region_us", "0 .. 1000000"},
                               {"host_threads", "core_dram_gbs", "0 .. 100000"},
                               {"host_threads", "clock_ghz", "0 .. 10"}};
  for (const Case& c : thread_cases)
    for (const char* v : {"-1", "1e30", ".nan"}) {
      const std::string m = error_with(LibraryKind::calibration, "ci-2core-cpu", c.section, c.key, v,
                                       [](YamlMap y) { load_calibration(y); });
      EXPECT_NE(m.find(c.range), std::string::npos) << c.key << " = " << v << ": " << m;
    }
}

}  // namespace
}  // namespace kvsim
