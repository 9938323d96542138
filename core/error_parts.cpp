#include "core/error_parts.hpp"

#include <regex>

namespace kvsim {

namespace {

// The first quoted or bare value the message names.
bool find_value(const std::string& m, std::string& out) {
  // Ordered: the more specific phrasing first ("policy 'P' has no parameter 'X'": X, not P).
  static const std::regex patterns[] = {
      std::regex(R"(has no parameter '([^']*)')"),
      std::regex(R"(\bvalue '([^']*)')"),
      std::regex(R"(\bvalue ([^ ;,:()]+))"),
      std::regex(R"(\bunknown [a-z ]+ '([^']*)')"),
      std::regex(R"(\bfile '([^']*)')"),
      std::regex(R"(^'([^']*)' is not)"),
  };
  std::smatch sm;
  for (const std::regex& re : patterns)
    if (std::regex_search(m, sm, re)) {
      out = sm[1].str();
      return true;
    }
  return false;
}

// What the message says is allowed, without a trailing "(did you mean ...)" or closing parenthesis.
bool find_allowed(const std::string& m, std::string& out) {
  static const std::regex pattern(R"(\b(?:allowed(?: [a-z ]+)?|available(?: in [^:]+)?|its parameters): )");
  std::smatch sm;
  if (!std::regex_search(m, sm, pattern)) return false;
  std::string a = sm.suffix().str();
  if (const size_t s = a.find(" (did you mean"); s != std::string::npos) a.erase(s);
  if (!a.empty() && a.back() == ')' && a.find('(') == std::string::npos) a.pop_back();
  out = a;
  return !out.empty();
}

}  // namespace

std::vector<std::string> allowed_items(const std::string& allowed) {
  std::vector<std::string> items;
  std::string cur;
  int depth = 0;
  const auto push = [&] {
    size_t b = cur.find_first_not_of(' '), e = cur.find_last_not_of(' ');
    std::string t = b == std::string::npos ? "" : cur.substr(b, e - b + 1);
    if (t.rfind("or ", 0) == 0) t.erase(0, 3);
    if (!t.empty()) items.push_back(t);
    cur.clear();
  };
  for (const char c : allowed) {
    if (c == '[' || c == '(' || c == '{') ++depth;
    if ((c == ']' || c == ')' || c == '}') && depth > 0) --depth;
    if (c == ',' && depth == 0) push();
    else cur += c;
  }
  push();
  return items;
}

ErrorParts error_parts(const std::string& message) {
  ErrorParts p;
  p.has_value = find_value(message, p.value);
  p.has_allowed = find_allowed(message, p.allowed);
  return p;
}

}  // namespace kvsim
