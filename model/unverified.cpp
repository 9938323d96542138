#include "model/unverified.hpp"

#include <filesystem>
#include <fstream>

#include "model/library.hpp"

namespace kvsim {

std::vector<UnverifiedConstant> unverified_constants(const std::string& path, const std::string& shown_as) {
  std::vector<UnverifiedConstant> out;
  std::ifstream in(path);
  if (!in) return out;
  // (indent, key) of the enclosing block keys: a key at indent i closes every open key at indent >= i.
  std::vector<std::pair<size_t, std::string>> open;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    const size_t hash = line.find('#');
    const std::string body = line.substr(0, hash);
    const size_t indent = body.find_first_not_of(' ');
    if (indent == std::string::npos) continue;  // blank or comment-only
    const size_t colon = body.find(':', indent);
    if (colon == std::string::npos || body[indent] == '-') continue;  // a list item or a continuation
    const std::string key = body.substr(indent, colon - indent);
    if (key.find_first_of(" \"'{[") != std::string::npos) continue;
    while (!open.empty() && open.back().first >= indent) open.pop_back();
    open.emplace_back(indent, key);
    if (hash == std::string::npos || line.find("UNVERIFIED", hash) == std::string::npos) continue;
    std::string dotted;
    for (const auto& [i, k] : open) dotted += (dotted.empty() ? "" : ".") + k;
    std::string note = line.substr(hash + 1);
    note.erase(0, note.find_first_not_of(' '));
    out.push_back({shown_as, dotted, n, note});
  }
  return out;
}

std::vector<UnverifiedConstant> unverified_in_force(const std::string& gpu_name, const std::string& host_name) {
  std::vector<UnverifiedConstant> out;
  auto add = [&](const char* sub, const std::string& name) {
    if (name.empty()) return;
    const std::string rel = std::string(sub) + "/" + name + ".yaml";
    const std::string path = library_dir() + "/" + rel;
    if (!std::filesystem::exists(path)) return;
    for (auto& u : unverified_constants(path, rel)) out.push_back(std::move(u));
  };
  add("hardware", gpu_name);
  add("hosts", host_name);
  return out;
}

}  // namespace kvsim
