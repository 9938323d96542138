#include "traces/llm/model_path.hpp"

#include <cstdlib>
#include <filesystem>

namespace kvsim::llm {

std::string model_dir() {
  if (const char* d = std::getenv("KVSIM_MODEL_DIR"); d && *d) return d;
  std::string cache;
  if (const char* c = std::getenv("KVSIM_CACHE"); c && *c) cache = c;
  else if (const char* h = std::getenv("HOME"); h && *h) cache = std::string(h) + "/.cache/kvsim";
  else return "";
  return cache + "/models";
}

std::string default_model_path() {
  const std::string dir = model_dir();
  if (dir.empty()) return "";
  const std::string p = dir + "/" + kDefaultModelFile;
  std::error_code ec;
  return std::filesystem::is_regular_file(p, ec) ? p : "";
}

}  // namespace kvsim::llm
