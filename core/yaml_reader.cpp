#include "core/yaml_reader.hpp"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

#include "core/error.hpp"
#include "core/input_limits.hpp"

namespace kvsim {

std::string format_number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.10g", v);
  return buf;
}

std::string Range::describe() const {
  std::string s;
  const bool unbounded = hi >= 1e17;
  if (unbounded) return std::string(lo_exclusive ? "> " : ">= ") + format_number(lo);
  return std::string(lo_exclusive ? "> " : "") + format_number(lo) + (lo_exclusive ? " and <= " : " .. ") +
         format_number(hi);
}

int line_of(const YAML::Node& n) {
  const auto m = n.Mark();
  return m.is_null() ? 0 : m.line + 1;
}

YAML::Node load_yaml_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw_input_error(path, 0, "", "cannot open file (does it exist and is it readable?)");
  // A YAML file is held in memory whole (and yaml-cpp's tree takes several times its size), so reading
  // stops one byte past the limit. Reading rather than asking the size also bounds a pipe or a device
  // such as /dev/zero named where a file was expected.
  const uint64_t limit = input_limit(InputLimit::yaml_bytes);
  std::string text;
  char buf[1 << 16];
  while (in && text.size() <= limit) {
    in.read(buf, sizeof buf);
    text.append(buf, size_t(in.gcount()));
  }
  if (text.size() > limit)
    throw_input_error(path, 0, "", limit_exceeded(InputLimit::yaml_bytes, "file size at least", text.size(), limit));
  return load_yaml_string(text, path);
}

YAML::Node load_yaml_string(const std::string& text, const std::string& name) {
  try {
    return YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw_input_error(name, e.mark.is_null() ? 0 : e.mark.line + 1, "", "YAML syntax error: " + e.msg);
  }
}

YamlMap::YamlMap(const YAML::Node& node, std::string file, std::string prefix, bool has_lines)
    : node_(node), file_(std::move(file)), prefix_(std::move(prefix)), has_lines_(has_lines) {
  if (!node_.IsMap()) {
    throw_input_error(file_, node_line(node_), prefix_.empty() ? "(document)" : prefix_,
                      "expected a mapping of key: value pairs");
  }
}

int YamlMap::line() const { return node_line(node_); }

int YamlMap::line_of(const std::string& key) const {
  const YAML::Node n = node_[key];
  const int l = n ? node_line(n) : 0;
  return l > 0 ? l : line();
}

void YamlMap::fail(const std::string& key, const std::string& message) const {
  throw_input_error(file_, line_of(key), field(key), message);
}

bool YamlMap::has(const std::string& key) const { return static_cast<bool>(node_[key]); }

YAML::Node YamlMap::node(const std::string& key) {
  used_.insert(key);
  return node_[key];
}

static std::string scalar_text(const YAML::Node& n) {
  if (n.IsScalar()) return n.Scalar();
  if (n.IsSequence()) return "a list";
  if (n.IsMap()) return "a mapping";
  return "null";
}

double YamlMap::parse_number(const YAML::Node& n, const std::string& key, Range range) const {
  const std::string text = scalar_text(n);
  double v = 0;
  const char* b = text.data();
  const char* e = b + text.size();
  auto [p, ec] = std::from_chars(b, e, v);
  if (!n.IsScalar() || ec != std::errc() || p != e) {
    throw_input_error(file_, n ? node_line(n) : line(), field(key),
                      "value '" + text + "' is not a number; allowed: a number " + range.describe());
  }
  if (!std::isfinite(v) || !range.contains(v)) {
    throw_input_error(file_, node_line(n), field(key),
                      "value " + text + " is out of range; allowed: " + range.describe());
  }
  return v;
}

double YamlMap::number(const std::string& key, Range range, std::optional<double> fallback) {
  used_.insert(key);
  const YAML::Node n = node_[key];
  if (!n) {
    if (fallback) return *fallback;
    fail(key, "missing required number (allowed: " + range.describe() + ")");
  }
  return parse_number(n, key, range);
}

int64_t YamlMap::integer(const std::string& key, Range range, std::optional<int64_t> fallback) {
  used_.insert(key);
  const YAML::Node n = node_[key];
  if (!n) {
    if (fallback) return *fallback;
    fail(key, "missing required integer (allowed: " + range.describe() + ")");
  }
  const double v = parse_number(n, key, range);
  if (v != std::floor(v) || std::fabs(v) > 9e15) {
    fail(key, "value " + scalar_text(n) + " is not an integer; allowed: an integer " + range.describe());
  }
  return static_cast<int64_t>(v);
}

std::string YamlMap::string(const std::string& key, std::optional<std::string> fallback) {
  used_.insert(key);
  const YAML::Node n = node_[key];
  if (!n) {
    if (fallback) return *fallback;
    fail(key, "missing required text value");
  }
  if (!n.IsScalar()) fail(key, "expected a text value, got " + scalar_text(n));
  return n.Scalar();
}

std::string YamlMap::choice(const std::string& key, const std::vector<std::string>& allowed,
                            std::optional<std::string> fallback) {
  const std::string v = string(key, fallback);
  for (const auto& a : allowed)
    if (a == v) return v;
  fail(key, "value '" + v + "' is not allowed; allowed: " + join(allowed) + suggestion(v, allowed));
}

bool YamlMap::boolean(const std::string& key, std::optional<bool> fallback) {
  used_.insert(key);
  const YAML::Node n = node_[key];
  if (!n) {
    if (fallback) return *fallback;
    fail(key, "missing required true/false value");
  }
  const std::string t = scalar_text(n);
  if (t == "true" || t == "True") return true;
  if (t == "false" || t == "False") return false;
  fail(key, "value '" + t + "' is not a boolean; allowed: true, false");
}

YamlMap YamlMap::map(const std::string& key) {
  used_.insert(key);
  const YAML::Node n = node_[key];
  if (!n) fail(key, "missing required section");
  if (!n.IsMap()) fail(key, "expected a mapping of key: value pairs, got " + scalar_text(n));
  return YamlMap(n, file_, field(key));
}

void YamlMap::finish() const {
  std::map<std::string, int> seen;
  std::vector<std::string> known(used_.begin(), used_.end());
  for (auto it = node_.begin(); it != node_.end(); ++it) {
    const int line = node_line(it->first);
    if (!it->first.IsScalar()) {
      throw_input_error(file_, line, prefix_.empty() ? "(document)" : prefix_,
                        "a key must be plain text, not a list or mapping");
    }
    const std::string key = it->first.Scalar();
    if (seen.count(key)) {
      throw_input_error(file_, line, field(key),
                        "duplicate key (first given on line " + std::to_string(seen[key]) + ")");
    }
    seen[key] = line;
    if (!used_.count(key)) {
      throw_input_error(file_, line, field(key),
                        "unknown key" + suggestion(key, known) + "; allowed here: " + join(known));
    }
  }
}

}  // namespace kvsim
