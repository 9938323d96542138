// core/error_parts: the value and the allowed values read back from the messages the throw sites form.
// The phrasings here are the ones the library's throw sites use (YamlMap, library names, --set, files);
// python/tests/test_keywords.py checks the same on errors the library actually raises.
#include <gtest/gtest.h>

#include "core/error_parts.hpp"
#include "core/yaml_reader.hpp"

namespace kvsim {
namespace {

TEST(ErrorParts, EachPhrasingGivesItsValueAndAllowed) {
  struct Case {
    const char* message;
    const char* value;    // nullptr: none named
    const char* allowed;  // nullptr: none named
  };
  const Case cases[] = {
      {"value 'fp4' is not allowed; allowed: fp32, fp16, bf16, fp8 (did you mean 'fp8'?)", "fp4", "fp32, fp16, bf16, fp8"},
      {"value 0 is out of range; allowed: an integer 1 .. 1000000000, or max", "0", "an integer 1 .. 1000000000, or max"},
      {"unknown hardware 'h2000' (did you mean 'h200'?); available in /lib/hardware: h100-sxm, h200", "h2000",
       "h100-sxm, h200"},
      {"unknown policy 'nope'; available: full, quest", "nope", "full, quest"},
      {"policy 'chess' has no parameter 'budget'; its parameters: page_size, rho_page", "budget", "page_size, rho_page"},
      {"file 'no/such.yaml' does not exist", "no/such.yaml", nullptr},
      {"'nonsense' is not of the form POLICY.PARAM=VALUE", "nonsense", nullptr},
      {"missing required number (allowed: 0 .. 1)", nullptr, "0 .. 1"},
      {"missing required section", nullptr, nullptr},
  };
  for (const Case& c : cases) {
    const ErrorParts p = error_parts(c.message);
    EXPECT_EQ(p.has_value, c.value != nullptr) << c.message;
    if (c.value) {
      EXPECT_EQ(p.value, c.value) << c.message;
    }
    EXPECT_EQ(p.has_allowed, c.allowed != nullptr) << c.message;
    if (c.allowed) {
      EXPECT_EQ(p.allowed, c.allowed) << c.message;
    }
  }
}

TEST(ErrorParts, ReadsAnErrorTheReaderThrows) {
  YamlMap m(load_yaml_string("rate: -3\n", "s.yaml"), "s.yaml", "");
  try {
    m.number("rate", Range::positive());
    FAIL() << "no error";
  } catch (const InputError& e) {
    const ErrorParts p = error_parts(e);
    EXPECT_EQ(p.value, "-3");
    EXPECT_EQ(p.allowed, Range::positive().describe());
  }
}

}  // namespace
}  // namespace kvsim
