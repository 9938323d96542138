// The GGUF reader: a small file serialized by hand in the test is read back; each kind of damage gives
// its own error naming the field; dequantization of hand-made blocks matches the block formulas.
#include <cmath>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/error.hpp"
#include "traces/format/half.hpp"
#include "traces/llm/gguf.hpp"
#include "tests/gguf_writer.hpp"

namespace {
using namespace kvsim;
using namespace kvsim::llm;
using kvsim::test_support::GgufWriter;

std::string floats(const std::vector<float>& v) { return std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4); }

std::string save(const std::string& name, const std::string& bytes) {
  const std::string path = std::string(::testing::TempDir()) + name;
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

// The message of the InputError reading `bytes` throws ("" when it reads fine).
std::string error_of(const std::string& bytes) {
  const std::string path = save("bad.gguf", bytes);
  try {
    GgufFile f(path);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

GgufWriter small_file() {
  GgufWriter w;
  w.kv_str("general.architecture", "llama");
  w.kv_u32("llama.block_count", 2);
  w.kv_f32("llama.rope.freq_base", 10000.0f);
  w.kv_strs("tokenizer.ggml.tokens", {"a", "b", "café"});
  w.kv_i32s("tokenizer.ggml.token_type", {1, 1, 3});
  w.tensor("w", {4, 2}, 0, floats({1, 2, 3, 4, 5, 6, 7, 8}));
  std::string h;
  for (float x : {0.5f, -1.0f, 2.0f, 65504.0f}) GgufWriter::put(h, float_to_fp16(x));
  w.tensor("h", {4}, 1, h);
  return w;
}

TEST(LlmGguf, ReadsBackAHandWrittenFile) {
  const std::string path = save("small.gguf", small_file().bytes());
  GgufFile f(path);
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.get_string("general.architecture"), "llama");
  EXPECT_EQ(f.get_int("llama.block_count"), 2);
  EXPECT_DOUBLE_EQ(f.get_float("llama.rope.freq_base"), 10000.0);
  EXPECT_EQ(f.get_int("missing.key", 7), 7);
  EXPECT_EQ(f.get_string_array("tokenizer.ggml.tokens"), (std::vector<std::string>{"a", "b", "café"}));
  EXPECT_EQ(f.get_number_array("tokenizer.ggml.token_type"), (std::vector<double>{1, 1, 3}));
  ASSERT_EQ(f.tensors().size(), 2u);
  const GgufTensor& w = f.tensor("w");
  EXPECT_EQ(w.dims, (std::vector<int64_t>{4, 2}));
  EXPECT_EQ(w.rows(), 2);
  EXPECT_EQ(f.dequantize(w), (std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(f.dequantize(f.tensor("h")), (std::vector<float>{0.5f, -1.0f, 2.0f, 65504.0f}));
  EXPECT_THROW(f.get_int("general.architecture"), InputError);
  EXPECT_THROW(f.tensor("nope"), InputError);
}

TEST(LlmGguf, MalformedFilesGiveSpecificErrors) {
  const std::string good = small_file().bytes();
  ASSERT_EQ(error_of(good), "");

  std::string bad = good;
  bad[0] = 'X';
  EXPECT_NE(error_of(bad).find("magic: 'XGUF' is not 'GGUF'"), std::string::npos) << error_of(bad);

  EXPECT_NE(error_of(good.substr(0, 10)).find("tensor count: file truncated"), std::string::npos) << error_of(good.substr(0, 10));
  EXPECT_NE(error_of("").find("magic: file truncated"), std::string::npos);

  bad = good;
  bad[4] = 9;  // version 9
  EXPECT_NE(error_of(bad).find("version: 9 is not supported"), std::string::npos);

  // The first key's length (right after the 24-byte header) made huge / past the end.
  bad = good;
  const uint64_t huge = 1000000;
  std::memcpy(&bad[24], &huge, 8);
  EXPECT_NE(error_of(bad).find("metadata key #0: string length 1000000 runs past the end"), std::string::npos) << error_of(bad);
  const uint64_t giant = 1ull << 40;
  std::memcpy(&bad[24], &giant, 8);
  EXPECT_NE(error_of(bad).find("exceeds the limit"), std::string::npos) << error_of(bad);

  // A tensor whose offset is past the data section.
  GgufWriter w = small_file();
  w.infos[1].offset = 1 << 20;
  EXPECT_NE(error_of(w.bytes()).find("tensor 'h': data [1048576, 1048584) runs past the end"), std::string::npos) << error_of(w.bytes());

  // A misaligned offset.
  w = small_file();
  w.infos[1].offset = 33;
  EXPECT_NE(error_of(w.bytes()).find("tensor 'h': offset 33 is not a multiple of the alignment 32"), std::string::npos);

  // Overlapping tensors.
  w = small_file();
  w.infos[1].offset = 0;
  EXPECT_NE(error_of(w.bytes()).find("overlaps tensor"), std::string::npos) << error_of(w.bytes());

  // An unknown tensor type.
  w = small_file();
  w.infos[0].type = 77;
  EXPECT_NE(error_of(w.bytes()).find("tensor 'w': type 77 is unknown"), std::string::npos) << error_of(w.bytes());

  // A dimension product that overflows.
  w = small_file();
  w.infos[0].dims = {1ull << 40, 1ull << 40};
  EXPECT_NE(error_of(w.bytes()).find("tensor 'w': element count overflows"), std::string::npos) << error_of(w.bytes());

  // An unknown metadata value type.
  w = GgufWriter();
  GgufWriter::put_str(w.head, "k");
  GgufWriter::put<uint32_t>(w.head, 42);
  w.n_kv = 1;
  EXPECT_NE(error_of(w.bytes()).find("metadata 'k': value type 42 is unknown"), std::string::npos) << error_of(w.bytes());

  // Version 2 has the same layout (64-bit counts) and is accepted.
  bad = good;
  bad[4] = 2;
  EXPECT_EQ(error_of(bad), "");

  // A string value and an array whose lengths run past the end of the file.
  w = GgufWriter();
  GgufWriter::put_str(w.head, "name");
  GgufWriter::put<uint32_t>(w.head, 8);
  GgufWriter::put<uint64_t>(w.head, 500);
  w.head += "short";
  w.n_kv = 1;
  EXPECT_NE(error_of(w.bytes()).find("metadata 'name': string length 500 runs past the end of the file"), std::string::npos) << error_of(w.bytes());
  w = GgufWriter();
  GgufWriter::put_str(w.head, "ids");
  GgufWriter::put<uint32_t>(w.head, 9);
  GgufWriter::put<uint32_t>(w.head, 5);
  GgufWriter::put<uint64_t>(w.head, 1ull << 40);
  w.n_kv = 1;
  EXPECT_NE(error_of(w.bytes()).find("metadata 'ids': array length 1099511627776 of i32 runs past the end"), std::string::npos) << error_of(w.bytes());

  // A bad alignment value.
  w = small_file();
  w.kv_u32("general.alignment", 24);
  EXPECT_NE(error_of(w.bytes()).find("metadata 'general.alignment': 24 is not allowed"), std::string::npos) << error_of(w.bytes());

  // Truncation inside the data section.
  EXPECT_NE(error_of(good.substr(0, good.size() - 3)).find("runs past the end of the data section"), std::string::npos);
}

// Every truncation and many single-byte corruptions of a valid file either read or give an
// InputError: never a crash, a huge allocation or another exception.
TEST(LlmGguf, CorruptionsNeverCrash) {
  const std::string good = small_file().bytes();
  int errors = 0;
  auto attempt = [&](const std::string& bytes) {
    try {
      GgufFile f("fuzz.gguf", bytes.data(), bytes.size());
      for (const GgufTensor& t : f.tensors())
        if (ggml_type_dequantizable(t.type)) f.dequantize(t);
    } catch (const InputError&) {
      ++errors;
    }
  };
  for (size_t n = 0; n < good.size(); n += 3) attempt(good.substr(0, n));
  for (size_t i = 0; i < good.size(); ++i)
    for (unsigned char v : {0x00, 0x01, 0x7F, 0x80, 0xFF}) {
      std::string b = good;
      if (uint8_t(b[i]) == v) continue;
      b[i] = char(v);
      attempt(b);
    }
  EXPECT_GT(errors, 100);
}

std::string half_bytes(float x) { std::string s; GgufWriter::put(s, float_to_fp16(x)); return s; }

TEST(LlmGgufDequant, Q8_0Q4_0Q4_1MatchTheirFormulas) {
  // Q8_0: x = d * q
  std::string b = half_bytes(0.25f);
  for (int j = 0; j < 32; ++j) b.push_back(char(int8_t(j - 16)));
  std::vector<float> y(32);
  dequantize_row(GgmlType::Q8_0, reinterpret_cast<const uint8_t*>(b.data()), y.data(), 32);
  for (int j = 0; j < 32; ++j) EXPECT_FLOAT_EQ(y[j], 0.25f * float(j - 16));

  // Q4_0: x = d * (nibble - 8), low nibbles first.
  b = half_bytes(0.5f);
  for (int j = 0; j < 16; ++j) b.push_back(char(uint8_t((j & 0xF) | (((15 - j) & 0xF) << 4))));
  dequantize_row(GgmlType::Q4_0, reinterpret_cast<const uint8_t*>(b.data()), y.data(), 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_FLOAT_EQ(y[j], 0.5f * float(j - 8));
    EXPECT_FLOAT_EQ(y[j + 16], 0.5f * float(15 - j - 8));
  }

  // Q4_1: x = d * nibble + m.
  b = half_bytes(0.125f) + half_bytes(-1.0f);
  for (int j = 0; j < 16; ++j) b.push_back(char(uint8_t(j | ((j / 2) << 4))));
  dequantize_row(GgmlType::Q4_1, reinterpret_cast<const uint8_t*>(b.data()), y.data(), 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_FLOAT_EQ(y[j], 0.125f * float(j) - 1.0f);
    EXPECT_FLOAT_EQ(y[j + 16], 0.125f * float(j / 2) - 1.0f);
  }

  // BF16 and F16 element-wise.
  std::string h;
  GgufWriter::put(h, float_to_bf16(3.5f));
  GgufWriter::put(h, float_to_bf16(-0.75f));
  dequantize_row(GgmlType::BF16, reinterpret_cast<const uint8_t*>(h.data()), y.data(), 2);
  EXPECT_FLOAT_EQ(y[0], 3.5f);
  EXPECT_FLOAT_EQ(y[1], -0.75f);
}

TEST(LlmGgufDequant, KQuantsMatchTheirFormulas) {
  // Q6_K: one super-block; all low nibbles 5, all high 2-bit fields 2, so q = 5 | 32 = 37 -> 37 - 32 = 5;
  // scales: group g has scale g - 8; d = 0.5. Element i is in 16-group i / 16.
  std::string b(128, char(0x55));
  b += std::string(64, char(0xAA));
  for (int g = 0; g < 16; ++g) b.push_back(char(int8_t(g - 8)));
  b += half_bytes(0.5f);
  ASSERT_EQ(b.size(), 210u);
  std::vector<float> y(256);
  dequantize_row(GgmlType::Q6_K, reinterpret_cast<const uint8_t*>(b.data()), y.data(), 256);
  for (int i = 0; i < 256; ++i) ASSERT_FLOAT_EQ(y[i], 0.5f * float(i / 16 - 8) * 5.0f) << i;

  // Q4_K: scales 1..4 / mins 0..3 for sub-blocks 0-3 (low 6 bits), sub-blocks 4-7 from bytes 8-11
  // (scale = low nibble, min = high nibble; top bits zero). Nibble value of sub-block j element l = l % 16.
  std::string k = half_bytes(0.5f) + half_bytes(0.25f);
  const int sc[8] = {1, 2, 3, 4, 5, 6, 7, 8}, mn[8] = {0, 1, 2, 3, 4, 5, 6, 7};
  for (int j = 0; j < 4; ++j) k.push_back(char(sc[j]));
  for (int j = 0; j < 4; ++j) k.push_back(char(mn[j]));
  for (int j = 4; j < 8; ++j) k.push_back(char(sc[j] | (mn[j] << 4)));
  for (int p = 0; p < 4; ++p)
    for (int l = 0; l < 32; ++l) k.push_back(char(uint8_t((l % 16) | ((l % 16) << 4))));
  ASSERT_EQ(k.size(), 144u);
  dequantize_row(GgmlType::Q4_K, reinterpret_cast<const uint8_t*>(k.data()), y.data(), 256);
  for (int i = 0; i < 256; ++i) {
    const int j = i / 32, l = i % 32;
    ASSERT_FLOAT_EQ(y[i], 0.5f * float(sc[j]) * float(l % 16) - 0.25f * float(mn[j])) << i;
  }
}

}  // namespace
