// Strict, self-describing access to one YAML mapping. Every loader (hardware, host, model, scenario,
// calibration) reads through this so all of them reject bad input the same way: the error names the
// file, the line, the dotted field path, the value and the allowed range, and a misspelled key gets a
// "did you mean". Keys a loader never asked for are errors too (finish()).
#pragma once
#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace kvsim {

// A closed or half-open interval with a human description, e.g. "> 0", "1 .. 64".
struct Range {
  double lo;
  double hi;
  bool lo_exclusive = false;
  static Range positive(double hi = 1e18) { return {0, hi, true}; }
  static Range at_least(double lo, double hi = 1e18) { return {lo, hi, false}; }
  static Range between(double lo, double hi) { return {lo, hi, false}; }
  bool contains(double v) const { return (lo_exclusive ? v > lo : v >= lo) && v <= hi; }
  std::string describe() const;
};

// Loads a YAML document. Missing files and syntax errors become InputError with the line.
YAML::Node load_yaml_file(const std::string& path);
YAML::Node load_yaml_string(const std::string& text, const std::string& name);

// 1-based line of a node, or 0 when yaml-cpp has none (a node built in code).
int line_of(const YAML::Node& n);

// Formats a number the way a user wrote it (no trailing zeros).
std::string format_number(double v);

class YamlMap {
 public:
  // `node` must be a mapping; `prefix` is the dotted path of this mapping ("" at top level).
  // `has_lines` is false for values that did not come from a file (command-line options).
  YamlMap(const YAML::Node& node, std::string file, std::string prefix, bool has_lines = true);

  bool has(const std::string& key) const;
  double number(const std::string& key, Range range, std::optional<double> fallback = std::nullopt);
  int64_t integer(const std::string& key, Range range, std::optional<int64_t> fallback = std::nullopt);
  std::string string(const std::string& key, std::optional<std::string> fallback = std::nullopt);
  // One of `allowed`; misspellings get a suggestion.
  std::string choice(const std::string& key, const std::vector<std::string>& allowed,
                     std::optional<std::string> fallback = std::nullopt);
  bool boolean(const std::string& key, std::optional<bool> fallback = std::nullopt);
  YamlMap map(const std::string& key);
  // The raw node, for fields with several accepted forms; marks the key as known.
  YAML::Node node(const std::string& key);

  // Rejects keys that were never read (with a suggestion among the ones that were) and duplicates.
  void finish() const;

  const std::string& file() const { return file_; }
  std::string field(const std::string& key) const { return prefix_.empty() ? key : prefix_ + "." + key; }
  int line() const;                             // 1-based line of this mapping
  int line_of(const std::string& key) const;    // 1-based line of key's value (or of the map)
  [[noreturn]] void fail(const std::string& key, const std::string& message) const;

  // Helpers for values that arrive as raw nodes (lists, alternatives).
  double parse_number(const YAML::Node& n, const std::string& key, Range range) const;

 private:
  YAML::Node node_;
  std::string file_;
  std::string prefix_;
  bool has_lines_ = true;
  std::set<std::string> used_;
  int node_line(const YAML::Node& n) const { return has_lines_ ? kvsim::line_of(n) : 0; }
};

}  // namespace kvsim
