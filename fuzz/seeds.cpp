// Writes the seed corpora for the fuzz targets: one directory per target under argv[1], each holding a
// few small valid inputs, so the fuzzer starts from files that pass every check and mutates inward.
// Generated rather than committed (nothing large in git); `make fuzz` runs this before fuzzing.
//   fuzz_seeds OUT_DIR SCENARIOS_DIR
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "tests/gguf_writer.hpp"
#include "traces/format/half.hpp"
#include "traces/format/safetensors.hpp"
#include "traces/synthetic/synthetic.hpp"
#include "traces/format/trace_file.hpp"
#include "traces/format/trace_meta_json.hpp"

namespace fs = std::filesystem;
using namespace kvsim;

namespace {

void write_bytes(const fs::path& path, const std::string& bytes) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << bytes;
}

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// A synthetic trace small enough to be a seed (a few KB): the tiny preset cut down to 32 tokens, d = 8.
void write_traces(const fs::path& out) {
  const std::vector<std::pair<std::string, std::string>> small = {
      {"head_dim", "8"}, {"prompt_tokens", "24"}, {"generated_tokens", "8"}, {"obs_window", "4"},
      {"mean_sentence_tokens", "6"}, {"needles", "[{depth: 0.5, length: 4}]"}, {"drift_steps", "4"}};
  const SyntheticTrace src(load_synthetic_config("tiny", small));
  for (const auto& [dtype, name] : {std::pair{DType::fp16, "tiny-fp16"}, {DType::bf16, "tiny-bf16"}, {DType::fp32, "tiny-fp32"}}) {
    const fs::path p = out / "trace_file" / (std::string(name) + ".safetensors");
    fs::create_directories(p.parent_path());
    write_trace(p.string(), src, dtype);
    if (dtype == DType::fp16) write_bytes(out / "safetensors" / "trace.safetensors", read_bytes(p));
  }
  write_bytes(out / "trace_meta" / "tiny.json", trace_meta_to_json(src.meta()).dump(1));
}

// A plain safetensors file with several dtypes, ranks (scalar included) and metadata.
void write_plain_safetensors(const fs::path& out) {
  const fs::path p = out / "safetensors" / "plain.safetensors";
  SafetensorsWriter w(p.string());
  w.add_tensor("scalar", StDType::F32, {});
  w.add_tensor("m", StDType::F16, {2, 3});
  w.add_tensor("ids", StDType::I32, {4});
  w.add_tensor("empty", StDType::U8, {0, 5});
  w.set_metadata("format", "pt");
  auto fill = [&](const std::string& name, size_t bytes) {
    w.write_tensor(name, [&](const SafetensorsWriter::Sink& sink) {
      const std::vector<unsigned char> b(bytes, 0x3c);
      sink(b.data(), b.size());
    });
  };
  fill("scalar", 4);
  fill("m", 12);
  fill("ids", 16);
  fill("empty", 0);
  w.commit();
}

// A GGUF with metadata of every shape the reader knows and tensors of a float and two block types.
void write_gguf(const fs::path& out) {
  test_support::GgufWriter w;
  w.kv_str("general.architecture", "llama");
  w.kv_u32("llama.block_count", 1);
  w.kv_f32("llama.rope.freq_base", 10000.0f);
  w.kv_strs("tokenizer.ggml.tokens", {"a", "b", "c"});
  w.kv_i32s("tokenizer.ggml.token_type", {1, 1, 3});
  std::string f32(32 * 4, '\0'), f16, q8((32 / 32) * 34, '\1'), q4(2 * 18, '\2');
  for (int i = 0; i < 32; ++i) test_support::GgufWriter::put(f16, float_to_fp16(float(i) / 8));
  w.tensor("f32", {8, 4}, 0, f32);
  w.tensor("f16", {32}, 1, f16);
  w.tensor("q8_0", {32}, 8, q8);
  w.tensor("q4_0", {32, 2}, 2, q4);
  write_bytes(out / "gguf" / "small.gguf", w.bytes());
}

// The repository's YAML files. library_yaml's first byte picks the loader (0 hardware, 1 host, 2 model).
void copy_yaml(const fs::path& out, const fs::path& scenarios) {
  auto each = [&](const fs::path& dir, const std::string& target, const std::string& prefix) {
    for (const auto& e : fs::directory_iterator(dir))
      if (e.path().extension() == ".yaml")
        write_bytes(out / target / e.path().filename(), prefix + read_bytes(e.path()));
  };
  each(scenarios, "scenario", "");
  each(scenarios / "calibration", "calibration", "");
  each(scenarios / "hardware", "library_yaml", std::string(1, '\0'));
  each(scenarios / "hosts", "library_yaml", std::string(1, '\1'));
  each(scenarios / "models", "library_yaml", std::string(1, '\2'));
  // A calibrated file too (roofline.yaml sets nothing), so every section of the loader has a seed.
  write_bytes(out / "calibration" / "measured.yaml",
              "schema: kvsim.calibration/1\nname: measured\ndescription: seed\n"
              "efficiency: {tensor: 0.7, hbm: 0.85}\nphases: {score: {simt: 0.5}, gather: {hbm: 0.6}}\n"
              "gather_half_run_bytes: {hbm: 64, h2d: 4096}\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: fuzz_seeds OUT_DIR SCENARIOS_DIR\n");
    return 2;
  }
  try {
    const fs::path out = argv[1];
    write_traces(out);
    write_plain_safetensors(out);
    write_gguf(out);
    copy_yaml(out, argv[2]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz_seeds: %s\n", e.what());
    return 1;
  }
  return 0;
}
