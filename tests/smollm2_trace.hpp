// A short SmolLM2 trace for the tests that replay a real model's attention: a few paragraphs about a
// river town and a question (about 250 tokens with five towns), then `generated` decode steps.
#pragma once
#include <string>

#include "traces/format/memory_trace.hpp"
#include "traces/llm/capture.hpp"
#include "traces/llm/llama.hpp"

namespace kvsim::test {

inline MemoryTrace river_trace(const llm::LlamaModel& model, int towns, int obs_window, int generated) {
  static const char* const kTowns[] = {"old town", "harbour", "valley", "hill village", "capital", "port", "island"};
  std::string text;
  for (int i = 0; i < towns; ++i)
    text += std::string("The river runs through the ") + kTowns[i % 7] +
            ". Farmers sell apples at the market by the bridge. In winter the river freezes and children skate "
            "on it. The market moves indoors, and the bakers sell bread and cakes to travellers. ";
  const auto prompt = model.tokenizer().encode(text + "Question: what do farmers sell?");
  llm::CaptureOptions o;
  o.obs_window = obs_window;
  o.stop_at_eos = false;
  o.threads = 2;
  return llm::capture_trace(model, prompt, generated, o);
}

}  // namespace kvsim::test
