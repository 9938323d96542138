// The GGUF llama path end to end: tokenizer, decoder and trace capture. Tests that need the real
// model (SmolLM2-135M-Instruct Q4_1) skip when it is absent: run tools/fetch-model.sh, or point
// KVSIM_MODEL_DIR at a directory holding it.
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "traces/llm/gguf.hpp"
#include "traces/llm/model_path.hpp"
#include "traces/llm/tokenizer.hpp"

namespace {
using namespace kvsim;
using namespace kvsim::llm;

const std::string kMixedText =
    "Hello world! It's 2024, isn't it? Prices: $3.50 (approx.)\n\n  Indented line\ttab\r\n"
    "café — naïve 東京 😀 x²+y³ done.";

// A vocabulary of the 256 single-byte pieces and no merges: every text must still round-trip.
Tokenizer byte_tokenizer(const std::string& pre) {
  std::vector<std::string> toks;
  // GPT-2's byte-to-unicode table, rebuilt here independently of the implementation.
  int next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
    const int cp = printable ? b : next++;
    std::string s;
    if (cp < 0x80) s.push_back(char(cp));
    else { s.push_back(char(0xC0 | (cp >> 6))); s.push_back(char(0x80 | (cp & 0x3F))); }
    toks.push_back(s);
  }
  return Tokenizer(toks, {}, {}, pre, -1, -1, "(test)");
}

TEST(LlmTokenizer, PreTokenizerFollowsTheGpt2Pattern) {
  const Tokenizer g = byte_tokenizer("gpt2");
  EXPECT_EQ(g.pre_tokenize("I don't know, it's 2024!  Really?\nNew"),
            (std::vector<std::string>{"I", " don", "'t", " know", ",", " it", "'s", " 2024", "!", " ", " Really", "?", "\n", "New"}));
  EXPECT_EQ(g.pre_tokenize("a\n\n b   "), (std::vector<std::string>{"a", "\n\n", " b", "   "}));
  EXPECT_EQ(g.pre_tokenize("café 東京"), (std::vector<std::string>{"café", " 東京"}));
  // SmolLM2 ("smollm") splits every digit first.
  const Tokenizer s = byte_tokenizer("smollm");
  EXPECT_EQ(s.pre_tokenize("in 2024."), (std::vector<std::string>{"in", " ", "2", "0", "2", "4", "."}));
}

TEST(LlmTokenizer, ByteLevelRoundTripWithoutMerges) {
  for (const char* pre : {"gpt2", "smollm"}) {
    const Tokenizer t = byte_tokenizer(pre);
    const std::vector<int32_t> ids = t.encode(kMixedText);
    EXPECT_EQ(t.decode(ids), kMixedText) << pre;
    std::string invalid = "bad \xff\xfe utf8 \xe2\x82";
    EXPECT_EQ(t.decode(t.encode(invalid)), invalid) << pre;
  }
}

std::string model_path_or_empty() { return default_model_path(); }

#define REQUIRE_MODEL()                                                                  \
  const std::string model_path = model_path_or_empty();                                  \
  if (model_path.empty()) GTEST_SKIP() << "model not available: run tools/fetch-model.sh"

TEST(LlmTokenizer, SmolLM2RoundTripAndKnownIds) {
  REQUIRE_MODEL();
  GgufFile f(model_path);
  Tokenizer t(f);
  EXPECT_EQ(t.pre(), "smollm");
  EXPECT_EQ(t.vocab_size(), 49152);
  EXPECT_EQ(t.bos(), 1);
  EXPECT_EQ(t.eos(), 2);
  EXPECT_EQ(t.decode(t.encode(kMixedText)), kMixedText);
  // Ids recorded from this implementation after checking them by hand against the vocabulary:
  // " the" is the single token "Ġthe"; every word of this prompt is one "Ġ"-prefixed token; digits
  // are split one per token as SmolLM2's pre-tokenizer does (Digits(individual_digits=True)); the
  // chat markers are the control tokens 1 and 2.
  EXPECT_EQ(t.encode(" the"), (std::vector<int32_t>{260}));
  EXPECT_EQ(t.encode("Hello world"), (std::vector<int32_t>{19556, 905}));
  EXPECT_EQ(t.encode("The capital of France is"), (std::vector<int32_t>{504, 3575, 282, 4649, 314}));
  EXPECT_EQ(t.encode("in 2024"), (std::vector<int32_t>{t.find("in"), 216, 34, 32, 34, 36}));
  EXPECT_EQ(t.encode("<|im_start|>user\nHi<|im_end|>"), (std::vector<int32_t>{1, 4093, 198, 26843, 2}));
  EXPECT_EQ(t.piece(260), "Ġthe");
}

}  // namespace
