// Where the default model (SmolLM2-135M-Instruct, Q4_1 GGUF) lives once tools/fetch-model.sh has
// fetched it. Tests and benchmarks that need a real model skip when this returns "".
#pragma once
#include <string>

namespace kvsim::llm {

inline constexpr const char* kDefaultModelFile = "SmolLM2-135M-Instruct.Q4_1.gguf";

// The model directory: $KVSIM_MODEL_DIR when set, else ${KVSIM_CACHE:-$HOME/.cache/kvsim}/models
// (the directory tools/fetch-model.sh fills).
std::string model_dir();

// model_dir()/kDefaultModelFile when that file exists, else "".
std::string default_model_path();

}  // namespace kvsim::llm
