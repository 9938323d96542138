// Where a piece of text lies in a token sequence: the tokens whose decoded text overlaps the first
// occurrence of `text`. Used to find a needle's span in a captured prompt and the answer in the
// generated text (`kvsim replay --needle/--answer`), whatever the tokenizer did at the span's edges.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "traces/llm/tokenizer.hpp"

namespace kvsim::llm {

// Token range [first, last) within ids[t0, t1) whose concatenated text covers the first occurrence of
// `text` in the decoded text of ids[t0, t1); nullopt when it does not occur (or `text` is empty).
std::optional<std::pair<int64_t, int64_t>> find_text_tokens(const Tokenizer& tok, const std::vector<int32_t>& ids,
                                                             const std::string& text, int64_t t0, int64_t t1);

}  // namespace kvsim::llm
