// Shared helpers for tests: library lookups and running the kvsim binary.
#pragma once
#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/wait.h>

#include <gtest/gtest.h>

#include "model/library.hpp"

namespace kvsim::test {

inline GpuSpec gpu(const std::string& n) { return load_gpu_file(resolve(LibraryKind::hardware, n, "", 0, "")); }
inline HostSpec host(const std::string& n) { return load_host_file(resolve(LibraryKind::host, n, "", 0, "")); }
inline ModelConfig model(const std::string& n) { return load_model_file(resolve(LibraryKind::model, n, "", 0, "")); }

struct RunResult {
  int exit_code;
  std::string out;  // stdout and stderr together
};

// Runs a shell command from the source directory; stdout and stderr together.
inline RunResult run_command(const std::string& command) {
  const std::string cmd = std::string("cd '") + KVSIM_SOURCE_DIR + "' && " + command + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  RunResult r{-1, ""};
  if (!p) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// Runs `kvsim ARGS` from the source directory.
inline RunResult run_kvsim(const std::string& args) { return run_command(std::string("'") + KVSIM_BINARY + "' " + args); }

// The whole text of a file.
inline std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A scratch file under the build tree's temp dir, removed by the caller if needed.
inline std::string write_temp(const std::string& name, const std::string& text) {
  const std::string path = std::string(::testing::TempDir()) + name;
  std::ofstream(path) << text;
  return path;
}

}  // namespace kvsim::test
