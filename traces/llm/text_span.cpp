#include "traces/llm/text_span.hpp"

#include <algorithm>

namespace kvsim::llm {

std::optional<std::pair<int64_t, int64_t>> find_text_tokens(const Tokenizer& tok, const std::vector<int32_t>& ids,
                                                             const std::string& text, int64_t t0, int64_t t1) {
  t0 = std::max<int64_t>(0, t0);
  t1 = std::min<int64_t>(int64_t(ids.size()), t1);
  if (text.empty() || t0 >= t1) return std::nullopt;
  std::string all;
  std::vector<size_t> start;  // byte offset of each token's text in `all`
  start.reserve(size_t(t1 - t0) + 1);
  for (int64_t t = t0; t < t1; ++t) {
    start.push_back(all.size());
    all += tok.token_text(ids[size_t(t)]);
  }
  start.push_back(all.size());
  const size_t at = all.find(text);
  if (at == std::string::npos) return std::nullopt;
  const size_t end = at + text.size();
  // first: the last token starting at or before `at`; last: the first token starting at or after `end`.
  const int64_t first = int64_t(std::upper_bound(start.begin(), start.end() - 1, at) - start.begin()) - 1;
  const int64_t last = int64_t(std::lower_bound(start.begin(), start.end() - 1, end) - start.begin());
  return std::make_pair(t0 + first, t0 + std::min<int64_t>(last, t1 - t0));
}

}  // namespace kvsim::llm
