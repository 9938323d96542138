// UNVERIFIED constants in force appear in the plan (issue 41 item 5; model/unverified.hpp): a field
// whose comment says UNVERIFIED is named with its dotted key and line, in the plan's text and JSON.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "model/unverified.hpp"
#include "test_util.hpp"

namespace kvsim {
namespace {

TEST(Unverified, AFieldWhoseCommentSaysUnverifiedIsNamedByItsDottedKey) {
  const std::string path = test::write_temp("unverified.yaml",
                                            "name: g   # datasheet\n"
                                            "launch:\n"
                                            "  kernel_us: 1.3   # estimate: UNVERIFIED (why)\n"
                                            "  host_launch_us: 3.3   # measured\n"
                                            "# a comment line that says UNVERIFIED names no field\n"
                                            "pcie:\n"
                                            "  h2d: {gbs: 25}   # UNVERIFIED inline map\n"
                                            "top: 1   # estimate: UNVERIFIED too\n");
  const auto u = unverified_constants(path, "hardware/g.yaml");
  ASSERT_EQ(u.size(), 3u);
  EXPECT_EQ(u[0].key, "launch.kernel_us");
  EXPECT_EQ(u[0].line, 3);
  EXPECT_EQ(u[0].note, "estimate: UNVERIFIED (why)");
  EXPECT_EQ(u[1].key, "pcie.h2d");
  EXPECT_EQ(u[2].key, "top");
  EXPECT_EQ(u[2].file, "hardware/g.yaml");
  EXPECT_TRUE(unverified_constants("/no/such/file.yaml", "x").empty());
}

TEST(Unverified, TheDefaultPlanNamesTheUnverifiedConstantsItRunsWith) {
  // The default scenario: an H100 SXM (kernel_us read only secondhand) on a Sapphire Rapids host
  // (all-core clock from a secondary dataset).
  const auto j = test::run_kvsim("plan --format json");
  ASSERT_EQ(j.exit_code, 0) << j.out;
  const nlohmann::json doc = nlohmann::json::parse(j.out);
  std::vector<std::string> keys;
  for (const auto& u : doc["unverified_constants"]) keys.push_back(u["file"].get<std::string>() + " " + u["key"].get<std::string>());
  EXPECT_NE(std::find(keys.begin(), keys.end(), "hardware/h100-sxm.yaml launch.kernel_us"), keys.end()) << doc["unverified_constants"];
  EXPECT_NE(std::find(keys.begin(), keys.end(), "hosts/sapphire-rapids-2s.yaml all_core_clock_ghz"), keys.end());
  const auto t = test::run_kvsim("plan --detail");
  ASSERT_EQ(t.exit_code, 0) << t.out;
  EXPECT_NE(t.out.find("unverified constants in force (no primary source; the file's comment says why): "
                       "hardware/h100-sxm.yaml:29 launch.kernel_us"),
            std::string::npos)
      << t.out;
}

}  // namespace
}  // namespace kvsim
