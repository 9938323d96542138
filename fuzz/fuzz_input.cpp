#include "fuzz/fuzz_input.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <stdexcept>

namespace kvsim::fuzz {

std::string write_temp_file(const uint8_t* data, size_t size, const char* suffix) {
  // TMPDIR lets a run keep its scratch file on tmpfs; the pid keeps parallel fuzzers (-jobs) apart.
  const char* dir = std::getenv("TMPDIR");
  const std::string path = std::string(dir && *dir ? dir : "/tmp") + "/kvsim-fuzz-" + std::to_string(getpid()) + suffix;
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) throw std::runtime_error("fuzz harness: cannot write " + path);
  if (size && std::fwrite(data, 1, size, f) != size) throw std::runtime_error("fuzz harness: short write to " + path);
  std::fclose(f);
  return path;
}

}  // namespace kvsim::fuzz
