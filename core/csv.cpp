#include "core/csv.hpp"

#include <charconv>

namespace kvsim {

void append_field(std::string& out, std::string_view t) {
  if (t.find_first_of(",\"\n\r") == std::string_view::npos) {
    out.append(t);
    return;
  }
  out.push_back('"');
  for (char c : t) {
    if (c == '"') out.push_back('"');
    out.push_back(c);
  }
  out.push_back('"');
}

std::string csv_field(std::string_view text) {
  std::string out;
  append_field(out, text);
  return out;
}

void append_number(std::string& out, double v) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

void append_integer(std::string& out, int64_t v) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

void append_hex(std::string& out, uint64_t v) {
  static const char* kDigits = "0123456789abcdef";
  char buf[16];
  for (int i = 15; i >= 0; --i, v >>= 4) buf[i] = kDigits[v & 15];
  out.append(buf, 16);
}

std::vector<std::string> split_line(std::string_view line) {
  std::vector<std::string> fields(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        fields.back().push_back('"');
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        fields.back().push_back(c);
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      fields.emplace_back();
    } else {
      fields.back().push_back(c);
    }
  }
  return fields;
}

void split_views(std::string_view line, std::vector<std::string_view>& out) {
  out.clear();
  size_t start = 0;
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    if (line[i] == '"') quoted = !quoted;  // a doubled quote toggles twice
    else if (line[i] == ',' && !quoted) {
      out.push_back(line.substr(start, i - start));
      start = i + 1;
    }
  }
  out.push_back(line.substr(start));
}

std::string_view first_field(std::string_view line) { return line.substr(0, line.find(',')); }

}  // namespace kvsim
