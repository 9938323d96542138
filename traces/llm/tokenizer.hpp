// Byte-level BPE (GPT-2 style), the tokenizer of SmolLM2 and other GGUF models whose
// `tokenizer.ggml.model` is "gpt2"; also SentencePiece-style BPE ("llama": Llama 2, TinyLlama). Text is split into pre-tokens (the GPT-2 pattern: contractions,
// letter runs, digit runs, punctuation runs, whitespace), each pre-token's bytes are mapped to
// printable characters by GPT-2's byte-to-unicode table, and merges are applied by rank.
//
// Pre-tokenizer types (`tokenizer.ggml.pre`): "gpt2" (and "default"/absent) use the GPT-2 pattern;
// "smollm" (with starcoder, refact, command-r, codeshell, exaone, minerva, which llama.cpp treats the
// same) first splits every digit into its own pre-token; "llama-bpe" (Llama 3) uses its own pattern
// (case-insensitive contractions, digit runs of at most 3, newlines kept with punctuation). Other
// types (qwen2, deepseek, ...) use different patterns and are refused rather than tokenized
// slightly wrong.
//
// Unicode letters/numbers (\p{L}, \p{N}) are classified by a compact table, exact for ASCII, Latin-1,
// CJK and the common punctuation/symbol blocks; rare scripts' marks and punctuation may differ from
// the full Unicode tables, which only changes where such text splits, never the round trip.
#pragma once
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace kvsim::llm {

class GgufFile;

class Tokenizer {
 public:
  // Reads tokens, token types, merges, pre type and special ids from the file's metadata. Throws
  // InputError naming the file and the metadata key.
  explicit Tokenizer(const GgufFile& file);
  // The same from plain lists (tests). `types` may be empty (all normal); `where` names the source in errors.
  Tokenizer(std::vector<std::string> tokens, std::vector<int> types, const std::vector<std::string>& merges,
            const std::string& pre, int32_t bos, int32_t eos, const std::string& where);

  // A SentencePiece-style vocabulary (`tokenizer.ggml.model` = llama: Llama 2, TinyLlama, Mistral):
  // no pre-tokenization, spaces written as U+2581, pieces merged greedily by score, characters
  // missing from the vocabulary spelled as byte tokens "<0xXX>". For tests; files use the
  // constructor above.
  static Tokenizer sentencepiece(std::vector<std::string> tokens, std::vector<int> types, std::vector<float> scores,
                                 int32_t bos, int32_t eos, bool add_space_prefix, const std::string& where);

  // Token ids of `text`. With `parse_special`, occurrences of control/user-defined token strings
  // (e.g. "<|im_start|>") become those tokens; otherwise they are tokenized as plain text.
  std::vector<int32_t> encode(const std::string& text, bool parse_special = true) const;
  // The text of `ids`; control tokens appear as their strings when `specials`, else are dropped.
  std::string decode(const std::vector<int32_t>& ids, bool specials = true) const;
  // The bytes one token stands for (control tokens: their string).
  std::string token_text(int32_t id) const;
  // The raw vocabulary string (byte-to-unicode mapped), e.g. "Ġthe".
  const std::string& piece(int32_t id) const { return tokens_.at(size_t(id)); }
  int32_t find(const std::string& piece) const;  // -1 when absent

  int32_t vocab_size() const { return int32_t(tokens_.size()); }
  int32_t bos() const { return bos_; }
  int32_t eos() const { return eos_; }
  bool is_control(int32_t id) const;
  // `tokenizer.ggml.add_bos_token`: whether the model expects bos() before a prompt (encode() never
  // adds it; callers that build prompts do).
  bool add_bos() const { return add_bos_; }
  const std::string& pre() const { return pre_; }

  // Pre-tokenization alone (exposed for tests): the pieces `text` splits into before BPE.
  std::vector<std::string> pre_tokenize(const std::string& text) const;

 private:
  std::vector<std::string> tokens_;
  std::vector<int> types_;
  std::unordered_map<std::string, int32_t> ids_;
  std::unordered_map<std::string, int32_t> merge_rank_;  // "left right" -> rank
  std::vector<int32_t> specials_;                         // control and user-defined ids, longest first
  std::string pre_;
  bool split_digits_ = false;
  bool llama3_ = false;
  bool add_bos_ = false;
  bool spm_ = false;                // SentencePiece mode (see sentencepiece())
  bool add_space_prefix_ = false;   // SentencePiece: a space before the text and after each special token
  std::vector<float> scores_;       // SentencePiece merge priorities, per token
  int32_t unk_ = -1;
  Tokenizer() = default;
  void spm(const std::string& text, std::vector<int32_t>& out) const;
  int32_t bos_ = -1, eos_ = -1;
  void init(const std::vector<std::string>& merges, const std::string& where);
  void bpe(const std::string& word, std::vector<int32_t>& out) const;
  void encode_plain(const std::string& text, std::vector<int32_t>& out) const;
};

}  // namespace kvsim::llm
