// The test binary's main: GoogleTest's, with one private temporary directory per process.
//
// ctest runs every test in its own process, two or more at a time (`ctest -j`), and many tests keep
// files under ::testing::TempDir() by fixed names (a generated trace, a cache, an output). Shared by
// name across processes, one test's regeneration of a trace changed the file another test was using
// (a quality cache keyed on the trace's mtime then missed). Each process gets its own directory
// instead, so fixed names stay private to the process that made them; the directory is removed at exit.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>

int main(int argc, char** argv) {
  std::string base = std::filesystem::temp_directory_path().string() + "/kvsim-test-XXXXXX";
  const char* dir = mkdtemp(base.data());
  if (dir) setenv("TEST_TMPDIR", dir, /*overwrite=*/1);  // read by ::testing::TempDir()
  testing::InitGoogleTest(&argc, argv);
  const int rc = RUN_ALL_TESTS();
  if (dir) {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  return rc;
}
