// Records a real attention trace by running a GGUF llama model on a prompt and generating from it:
// post-RoPE keys/values of every token, queries at the last prompt positions and at every
// generated position, and per-token statistics (surprisal, entropy, varentropy, sentence starts).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.hpp"
#include "traces/llm/llama.hpp"
#include "traces/format/memory_trace.hpp"

namespace kvsim::llm {

struct CaptureOptions {
  std::vector<int> layers;    // model layers to store (sorted, unique); empty = all
  std::vector<int> kv_heads;  // KV heads to store (sorted, unique); empty = all. Query heads stored:
                              // every head of those KV heads' groups.
  int obs_window = 32;        // queries stored at the last obs_window prompt positions (fewer when the prompt is shorter)
  bool with_values = true;
  double temperature = 0;     // 0: greedy; > 0: sampling from softmax(logits / temperature)
  uint64_t seed = 0;          // sampling seed
  bool stop_at_eos = true;    // stop generating after the end-of-sequence token (it is kept)
  int chunk = 128;            // prefill chunk (tokens per forward pass)
  int threads = 1;            // threads for the weight products (LlamaSession::set_threads)
  DType dtype = DType::fp32;  // the MemoryTrace's storage dtype (what a writer will store)
  TraceProvenance source;     // copied into the trace; kind defaults to "gguf", model to the file
};

// Runs `prompt` (at least one token) and generates up to `gen_tokens` more (fewer when stop_at_eos
// hits the end token). Token t's entry in surprisal is -log p(token t | tokens < t) ([0] = 0);
// entropy/varentropy entry i describe the distribution token P + i was drawn from. The query at
// position p is the one that attends keys 0..p. Throws InputError for bad options ("capture
// layers", ...) and std::out_of_range for token ids outside the vocabulary.
MemoryTrace capture_trace(const LlamaModel& model, const std::vector<int32_t>& prompt, int gen_tokens,
                          const CaptureOptions& options = {});

// First token of each sentence: 0, then every token where non-space text resumes after '.', '!' or
// '?' followed by whitespace (in the tokens' decoded text).
std::vector<int64_t> sentence_starts(const Tokenizer& tok, const std::vector<int32_t>& ids);

}  // namespace kvsim::llm
