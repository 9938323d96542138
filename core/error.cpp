#include "core/error.hpp"

#include <algorithm>
#include <sstream>

namespace kvsim {

void throw_input_error(const std::string& file, int line, const std::string& field,
                       const std::string& message) {
  std::ostringstream o;
  o << file;
  if (line > 0) o << ':' << line;
  if (!file.empty()) o << ": ";
  if (!field.empty()) o << field << ": ";
  o << message;
  InputError e(o.str());
  e.file = file;
  e.line = line;
  e.field = field;
  e.message = message;
  throw e;
}

namespace {
// Optimal-string-alignment distance (Levenshtein plus adjacent transposition: "cotnext" is one edit).
size_t edit_distance(const std::string& a, const std::string& b) {
  const size_t n = a.size(), m = b.size();
  std::vector<std::vector<size_t>> d(n + 1, std::vector<size_t>(m + 1));
  for (size_t i = 0; i <= n; ++i) d[i][0] = i;
  for (size_t j = 0; j <= m; ++j) d[0][j] = j;
  for (size_t i = 1; i <= n; ++i)
    for (size_t j = 1; j <= m; ++j) {
      const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[n][m];
}
}  // namespace

std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_d = SIZE_MAX;
  for (const auto& c : candidates) {
    const size_t dist = edit_distance(word, c);
    if (dist < best_d) best_d = dist, best = c;
  }
  // A plausible typo: at most a third of the word's letters wrong (and at least one allowed).
  const size_t limit = std::max<size_t>(1, word.size() / 3);
  return best_d <= limit ? best : std::string();
}

std::string suggestion(const std::string& word, const std::vector<std::string>& candidates) {
  const std::string g = did_you_mean(word, candidates);
  return g.empty() ? std::string() : " (did you mean '" + g + "'?)";
}

std::string join(const std::vector<std::string>& items, const std::string& empty) {
  if (items.empty()) return empty;
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

}  // namespace kvsim
