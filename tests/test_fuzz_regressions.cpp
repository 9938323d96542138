// Inputs the fuzz targets (fuzz/, docs/robustness.md) found crashing kvsim, each reduced to what
// triggers it and fed through the same entry point: they must now give an InputError.
#include <string>

#include <gtest/gtest.h>

#include "core/error.hpp"
#include "model/scenario.hpp"
#include "core/yaml_reader.hpp"
#include "policies/registry.hpp"

namespace kvsim {
namespace {

std::string scenario_error(const std::string& yaml) {
  try {
    load_scenario(load_yaml_string(yaml, "fuzz.yaml"), "fuzz.yaml", policy_catalog());
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

// fuzz_scenario, crash-85d006df: a library name longer than a file name may be (ENAMETOOLONG) made the
// throwing std::filesystem::exists escape as std::filesystem::filesystem_error: the CLI reported
// "kvsim: internal error ... please report this" with exit status 3 instead of naming the field.
// Both the path form and the name form.
TEST(FuzzRegressions, OverlongLibraryNameIsAnInputError) {
  const std::string long_name(5000, 'a');
  std::string msg = scenario_error("hardware: h100-sxm\nmodel: " + long_name + "\n");
  EXPECT_NE(msg.find("fuzz.yaml:2: model: unknown model"), std::string::npos) << msg.substr(0, 200);
  msg = scenario_error("hardware: h100-sxm\nmodel: x/" + long_name + ".yaml\n");
  EXPECT_NE(msg.find("fuzz.yaml:2: model: file 'x/"), std::string::npos) << msg.substr(0, 200);
  EXPECT_NE(msg.find("does not exist (File name too long)"), std::string::npos) << msg.substr(msg.size() - 100);
}

}  // namespace
}  // namespace kvsim
