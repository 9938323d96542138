// Trace files (docs/trace-format.md): round trips through every storage dtype and through shard
// directories, one specific error per malformed input, robustness against truncation and corruption,
// and lazy reading (opening a large trace and reading one layer touches little memory).
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <typeinfo>
#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "traces/format/memory_trace.hpp"
#include "traces/format/safetensors.hpp"
#include "traces/format/trace_file.hpp"
#include "traces/format/trace_meta_json.hpp"

namespace kvsim {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// A scratch path removed (file or directory) when the test ends.
struct TempPath {
  std::string path;
  explicit TempPath(const std::string& name)
      : path(::testing::TempDir() + "kvsim_tracefile_" + std::to_string(::getpid()) + "_" + name) {
    fs::remove_all(path);
  }
  ~TempPath() { fs::remove_all(path); }
};

// Model: 4 layers, 4 query heads over 2 KV heads (group 2), head_dim 8. Stored: layers 0, 1, 3.
TraceMeta tiny_meta() {
  TraceMeta m;
  m.model = {"tiny", 4, 4, 2, 8, 10000.0, "bf16"};
  m.layers = {0, 1, 3};
  m.kv_heads = {0, 1};
  m.query_heads = {0, 1, 2, 3};
  m.prompt_tokens = 8;
  m.sentence_starts = {0, 5};
  m.source = {"synthetic", "none", "unit test", "kvsim_tests", 42};
  return m;
}

TraceTokens tiny_tokens(bool stats) {
  TraceTokens t;
  for (int i = 0; i < 12; ++i) t.token_ids.push_back(i * 7 + 1);
  t.query_positions = {6, 7, 9, 10, 11};  // two prompt-window queries, three decode steps
  if (stats) {
    for (int i = 0; i < 12; ++i) t.surprisal.push_back(i == 0 ? 0.0f : 0.25f * float(i));
    for (int i = 0; i < 4; ++i) t.entropy.push_back(1.0f + float(i)), t.varentropy.push_back(0.5f * float(i));
  }
  return t;
}

std::unique_ptr<MemoryTrace> random_trace(const TraceMeta& m, bool values, uint32_t seed) {
  auto tr = std::make_unique<MemoryTrace>(m, tiny_tokens(true), values);
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 2.0f);
  const int d = m.model.head_dim;
  for (int l = 0; l < int(m.layers.size()); ++l) {
    for (int h = 0; h < int(m.kv_heads.size()); ++h)
      for (int64_t t = 0; t < tr->tokens_count(); ++t)
        for (int i = 0; i < d; ++i) {
          tr->key_row(l, h, t)[i] = nd(rng);
          if (values) tr->value_row(l, h, t)[i] = nd(rng);
        }
    for (int h = 0; h < int(m.query_heads.size()); ++h)
      for (int64_t s = 0; s < tr->steps_count(); ++s)
        for (int i = 0; i < d; ++i) tr->query_row(l, h, s)[i] = nd(rng);
  }
  return tr;
}

// Every row of a and b agrees within rel * |a| + abs.
void expect_same_data(const TraceSource& a, const TraceSource& b, float rel, float abs_tol) {
  ASSERT_EQ(a.meta().layers, b.meta().layers);
  ASSERT_EQ(a.has_values(), b.has_values());
  const int d = a.head_dim();
  const int64_t T = a.tokens_count(), S = a.steps_count();
  std::vector<float> x(size_t(T * d)), y(size_t(T * d));
  const auto cmp = [&](size_t n, const std::string& what) {
    for (size_t i = 0; i < n; ++i)
      ASSERT_LE(std::fabs(x[i] - y[i]), rel * std::fabs(x[i]) + abs_tol) << what << " element " << i;
  };
  for (int l = 0; l < int(a.meta().layers.size()); ++l) {
    for (int h = 0; h < int(a.meta().kv_heads.size()); ++h) {
      a.keys(l, h, 0, T, x.data());
      b.keys(l, h, 0, T, y.data());
      cmp(size_t(T * d), "keys l" + std::to_string(l) + " h" + std::to_string(h));
      if (a.has_values()) {
        a.values(l, h, 0, T, x.data());
        b.values(l, h, 0, T, y.data());
        cmp(size_t(T * d), "values l" + std::to_string(l) + " h" + std::to_string(h));
      }
    }
    for (int h = 0; h < int(a.meta().query_heads.size()); ++h) {
      a.queries(l, h, 0, S, x.data());
      b.queries(l, h, 0, S, y.data());
      cmp(size_t(S * d), "queries l" + std::to_string(l) + " h" + std::to_string(h));
    }
  }
}

void expect_same_meta_and_tokens(const TraceSource& a, const TraceSource& b) {
  EXPECT_EQ(trace_meta_to_json(a.meta()), trace_meta_to_json(b.meta()));
  EXPECT_EQ(a.tokens().token_ids, b.tokens().token_ids);
  EXPECT_EQ(a.tokens().query_positions, b.tokens().query_positions);
  EXPECT_EQ(a.tokens().surprisal, b.tokens().surprisal);
  EXPECT_EQ(a.tokens().entropy, b.tokens().entropy);
  EXPECT_EQ(a.tokens().varentropy, b.tokens().varentropy);
}

// The InputError message open() gives, or "(opened)".
std::string open_error(const std::string& path) {
  try {
    TraceFile::open(path);
  } catch (const InputError& e) {
    return e.what();
  }
  return "(opened)";
}

#define EXPECT_CONTAINS(text, part)                                   \
  do {                                                                \
    const std::string text_ = (text);                                 \
    EXPECT_NE(text_.find(part), std::string::npos) << "message: " << text_; \
  } while (0)

// A safetensors file from a raw header text and a data buffer of `data_bytes` zero bytes.
void write_raw_header(const std::string& path, const std::string& header, size_t data_bytes) {
  std::string out(8, '\0');
  const uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[size_t(i)] = char((n >> (8 * i)) & 0xff);
  out += header;
  out.append(data_bytes, '\0');
  std::ofstream(path, std::ios::binary) << out;
}

// A trace file built tensor by tensor, for inputs write_trace() refuses to produce.
struct HandTrace {
  json meta = trace_meta_to_json(tiny_meta());
  std::map<std::string, std::string> metadata;  // besides kvsim_trace
  bool with_kvsim_trace = true;
  struct Tensor {
    SafetensorsDecl decl;
    std::string data;  // empty: zeros
  };
  std::vector<Tensor> tensors;

  HandTrace() {
    const TraceTokens t = tiny_tokens(false);
    std::string ids(t.token_ids.size() * 4, '\0'), pos(t.query_positions.size() * 8, '\0');
    std::memcpy(ids.data(), t.token_ids.data(), ids.size());
    std::memcpy(pos.data(), t.query_positions.data(), pos.size());
    tensors.push_back({{"token_ids", StDType::I32, {12}}, ids});
    tensors.push_back({{"query_positions", StDType::I64, {5}}, pos});
    tensors.push_back({{"keys", StDType::F16, {3, 2, 12, 8}}, ""});
    tensors.push_back({{"queries", StDType::F16, {3, 4, 5, 8}}, ""});
  }
  Tensor& operator[](const std::string& name) {
    for (auto& t : tensors)
      if (t.decl.name == name) return t;
    throw std::logic_error("no tensor " + name);
  }
  void write(const std::string& path) const {
    auto md = metadata;
    if (with_kvsim_trace) md["kvsim_trace"] = meta.dump();
    std::vector<SafetensorsDecl> decls;
    for (const auto& t : tensors) decls.push_back(t.decl);
    const SafetensorsLayout lay = plan_safetensors(decls, md);
    std::string out = lay.prefix;
    for (const auto& t : tensors) out += t.data.empty() ? std::string(size_t(t.decl.bytes()), '\0') : t.data;
    std::ofstream(path, std::ios::binary) << out;
  }
};

// Overwrites bytes of tensor `name` at byte offset `offset` within it.
void patch_tensor(const std::string& path, const std::string& name, size_t offset, const void* bytes, size_t n) {
  uint64_t at;
  {
    MappedFile f(path);
    const SafetensorsHeader h = parse_safetensors(f, path);
    const SafetensorsEntry* e = h.find(name);
    ASSERT_NE(e, nullptr);
    at = h.data_start + e->begin + offset;
  }
  std::fstream io(path, std::ios::in | std::ios::out | std::ios::binary);
  io.seekp(std::streamoff(at));
  io.write(static_cast<const char*>(bytes), std::streamsize(n));
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Removes the old file first: truncating a file that has data makes ext4 flush it (auto_da_alloc),
// which costs milliseconds per call in the corruption loop.
void write_bytes(const std::string& path, const std::string& bytes) {
  fs::remove(path);
  std::ofstream(path, std::ios::binary) << bytes;
}

// ---------------------------------------------------------------------------------------------------
// Round trips

void round_trip(DType dtype, float rel) {
  TempPath p("rt.safetensors");
  const auto mem = random_trace(tiny_meta(), true, 7);
  std::vector<double> fractions;
  write_trace(p.path, *mem, dtype, [&](double f) { fractions.push_back(f); });
  ASSERT_FALSE(fractions.empty());
  EXPECT_DOUBLE_EQ(fractions.back(), 1.0);
  EXPECT_TRUE(std::is_sorted(fractions.begin(), fractions.end()));
  EXPECT_FALSE(fs::exists(p.path + ".tmp." + std::to_string(::getpid())));

  const auto tf = TraceFile::open(p.path);
  EXPECT_EQ(tf->storage_dtype(), dtype);
  EXPECT_TRUE(tf->has_values());
  expect_same_meta_and_tokens(*mem, *tf);
  expect_same_data(*mem, *tf, rel, 1e-6f);
  tf->check_finite_all();

  EXPECT_EQ(tf->file_bytes(), fs::file_size(p.path));
  const TensorView* k = tf->tensor("keys");
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->shape, (std::vector<int64_t>{3, 2, 12, 8}));
  EXPECT_EQ(k->bytes, size_t(3 * 2 * 12 * 8) * size_t(bytes_of(dtype)));
  EXPECT_EQ(tf->tensor("nonexistent"), nullptr);
  EXPECT_EQ(tf->tensor_bytes().size(), 8u);  // every tensor, small and big

  // The data buffer starts 8-byte aligned, as in the reference implementation.
  MappedFile f(p.path);
  EXPECT_EQ(parse_safetensors(f, p.path).data_start % 8, 0u);
}

TEST(TraceFileRoundTrip, Fp32IsExact) { round_trip(DType::fp32, 0.0f); }
TEST(TraceFileRoundTrip, Fp16WithinHalfPrecision) { round_trip(DType::fp16, 1.0f / 2048); }
TEST(TraceFileRoundTrip, Bf16WithinBfloatPrecision) { round_trip(DType::bf16, 1.0f / 256); }

TEST(TraceFileRoundTrip, NonUtf8ProvenanceIsReplacedNotFatal) {
  TempPath p("utf8.safetensors");
  TraceMeta m = tiny_meta();
  m.source.command = "kvsim trace make --text caf\xe9.txt";  // Latin-1 byte, not UTF-8
  write_trace(p.path, MemoryTrace(m, tiny_tokens(false), false), DType::fp32);
  EXPECT_EQ(TraceFile::open(p.path)->meta().source.command, "kvsim trace make --text caf\xef\xbf\xbd.txt");
}

TEST(TraceFileRoundTrip, WithoutValuesOrStatistics) {
  TempPath p("novalues.safetensors");
  MemoryTrace mem(tiny_meta(), tiny_tokens(false), false);
  mem.key_row(2, 1, 11)[7] = 3.5f;
  write_trace(p.path, mem, DType::fp16);
  const auto tf = TraceFile::open(p.path);
  EXPECT_FALSE(tf->has_values());
  EXPECT_TRUE(tf->tokens().surprisal.empty());
  EXPECT_TRUE(tf->tokens().entropy.empty());
  float row[8];
  tf->keys(2, 1, 11, 12, row);
  EXPECT_EQ(row[7], 3.5f);
  EXPECT_THROW(tf->values(0, 0, 0, 1, row), std::logic_error);
  EXPECT_THROW(tf->keys(3, 0, 0, 1, row), std::out_of_range);
  EXPECT_THROW(tf->keys(0, 0, 0, 13, row), std::out_of_range);
}

TEST(TraceFileRoundTrip, ShardDirectoryEqualsSingleFile) {
  TempPath single("single.safetensors"), dir("shards");
  const TraceMeta m = tiny_meta();
  const auto full = random_trace(m, true, 11);
  write_trace(single.path, *full, DType::fp32);

  // Shard "a" holds model layers 0 and 3 (slots 0, 2), shard "b" layer 1 (slot 1).
  fs::create_directories(dir.path);
  const auto shard = [&](std::vector<int> slots, const std::string& name) {
    TraceMeta sm = m;
    sm.layers.clear();
    for (int s : slots) sm.layers.push_back(m.layers[size_t(s)]);
    MemoryTrace part(sm, full->tokens(), true);
    for (size_t i = 0; i < slots.size(); ++i) {
      for (int h = 0; h < 2; ++h) {
        full->keys(slots[i], h, 0, 12, part.key_row(int(i), h, 0));
        full->values(slots[i], h, 0, 12, part.value_row(int(i), h, 0));
      }
      for (int h = 0; h < 4; ++h) full->queries(slots[i], h, 0, 5, part.query_row(int(i), h, 0));
    }
    write_trace(dir.path + "/" + name, part, DType::fp32);
  };
  shard({0, 2}, "a.safetensors");
  shard({1}, "b.safetensors");
  std::ofstream(dir.path + "/README.txt") << "not a shard; ignored\n";

  const auto one = TraceFile::open(single.path);
  const auto many = TraceFile::open(dir.path);
  EXPECT_TRUE(many->is_directory());
  EXPECT_EQ(many->shards().size(), 2u);
  expect_same_meta_and_tokens(*one, *many);
  expect_same_data(*one, *many, 0.0f, 0.0f);
  many->check_finite_all();
}

TEST(TraceFileRoundTrip, Fp8AndOverflowAreRefused) {
  TempPath p("refused.safetensors");
  auto mem = random_trace(tiny_meta(), false, 3);
  EXPECT_CONTAINS([&] {
    try { write_trace(p.path, *mem, DType::fp8); } catch (const InputError& e) { return std::string(e.what()); }
    return std::string("(written)");
  }(), "fp8 is not a trace storage type");
  mem->key_row(1, 0, 4)[3] = 1e6f;  // finite in fp32 and bf16, infinite in fp16
  const std::string msg = [&] {
    try { write_trace(p.path, *mem, DType::fp16); } catch (const InputError& e) { return std::string(e.what()); }
    return std::string("(written)");
  }();
  EXPECT_CONTAINS(msg, "keys: layer slot 1 (model layer 1), KV head slot 0, token 4, element 3: value 1e+06 overflows fp16");
  EXPECT_FALSE(fs::exists(p.path));  // nothing half-written
  EXPECT_FALSE(fs::exists(p.path + ".tmp." + std::to_string(::getpid())));
  write_trace(p.path, *mem, DType::bf16);
  EXPECT_TRUE(fs::exists(p.path));
}

// ---------------------------------------------------------------------------------------------------
// The container writer on its own

TEST(TraceFileSafetensors, WriterStreamsAlignsAndIsAtomic) {
  TempPath p("writer.safetensors");
  const std::string tmp = p.path + ".tmp." + std::to_string(::getpid());
  {
    SafetensorsWriter w(p.path);
    w.set_metadata("note", "hello");
    w.add_tensor("a", StDType::U8, {3});
    w.add_tensor("b", StDType::F32, {2, 2});
    w.write_tensor("a", [](const SafetensorsWriter::Sink& sink) { sink("xyz", 3); });
    EXPECT_TRUE(fs::exists(tmp));
    EXPECT_FALSE(fs::exists(p.path));
    EXPECT_THROW(w.write_tensor("a", [](const SafetensorsWriter::Sink&) {}), std::logic_error);  // out of order
    EXPECT_THROW(w.commit(), std::logic_error);                                                 // b unwritten
  }  // destroyed without commit
  EXPECT_FALSE(fs::exists(tmp));
  EXPECT_FALSE(fs::exists(p.path));

  SafetensorsWriter w(p.path);
  w.set_metadata("note", "hello");
  w.add_tensor("a", StDType::U8, {3});
  w.add_tensor("b", StDType::F32, {2, 2});
  w.write_tensor("a", [](const SafetensorsWriter::Sink& sink) { sink("xy", 2), sink("z", 1); });
  const float b[4] = {1, 2, 3, 4};
  w.write_tensor("b", [&](const SafetensorsWriter::Sink& sink) {
    for (float x : b) sink(&x, 4);
  });
  w.commit();
  EXPECT_EQ(fs::file_size(p.path), w.file_size());

  MappedFile f(p.path);
  const SafetensorsHeader h = parse_safetensors(f, p.path);
  EXPECT_EQ(h.data_start % 8, 0u);
  EXPECT_EQ(h.metadata.at("note"), "hello");
  ASSERT_EQ(h.tensors.size(), 2u);
  const TensorView a = tensor_view(f, h, h.tensors[0]), bv = tensor_view(f, h, h.tensors[1]);
  EXPECT_EQ(a.name, "a");
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(a.data), a.bytes), "xyz");
  EXPECT_EQ(bv.shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(std::memcmp(bv.data, b, 16), 0);
}

// ---------------------------------------------------------------------------------------------------
// Container errors

TEST(TraceFileErrors, ShorterThanEightBytes) {
  TempPath p("short.safetensors");
  write_bytes(p.path, "abcde");
  EXPECT_CONTAINS(open_error(p.path), "file is 5 bytes; a safetensors file starts with an 8-byte header length");
  write_bytes(p.path, "");
  EXPECT_CONTAINS(open_error(p.path), "file is 0 bytes");
}

TEST(TraceFileErrors, TruncatedFile) {
  TempPath p("trunc.safetensors");
  write_trace(p.path, *random_trace(tiny_meta(), true, 1), DType::fp16);
  fs::resize_file(p.path, fs::file_size(p.path) - 10);
  const std::string msg = open_error(p.path);
  EXPECT_CONTAINS(msg, "tensor 'queries' data_offsets");
  EXPECT_CONTAINS(msg, "run past the end of the data buffer");
  EXPECT_CONTAINS(msg, "is the file truncated?");
}

TEST(TraceFileErrors, HeaderLengthPastEndOfFile) {
  TempPath p("hlen.safetensors");
  std::string bytes(8, '\0');
  bytes[0] = char(0x40), bytes[1] = char(0xe2), bytes[2] = char(0x01);  // 123456
  bytes += "{}";
  write_bytes(p.path, bytes);
  EXPECT_CONTAINS(open_error(p.path), "header length 123456 runs past the end of the file (size 10)");
}

TEST(TraceFileErrors, HeaderNotJson) {
  TempPath p("notjson.safetensors");
  write_raw_header(p.path, "{\"keys\": nope}", 0);
  EXPECT_CONTAINS(open_error(p.path), "header is not valid JSON at byte");
  write_raw_header(p.path, "[1, 2]", 0);
  EXPECT_CONTAINS(open_error(p.path), "header is a JSON array; it must be an object");
  write_raw_header(p.path, R"({"a": {"dtype": "F32", "shape": [], "data_offsets": [0, 4]}, "a": 1})", 4);
  EXPECT_CONTAINS(open_error(p.path), "key 'a' appears twice");
}

TEST(TraceFileErrors, UnknownDtype) {
  TempPath p("dtype.safetensors");
  write_raw_header(p.path, R"({"keys": {"dtype": "F17", "shape": [2], "data_offsets": [0, 8]}})", 8);
  EXPECT_CONTAINS(open_error(p.path), "tensor 'keys' has unknown dtype 'F17' (did you mean 'F16'?)");
}

TEST(TraceFileErrors, MalformedEntries) {
  TempPath p("entry.safetensors");
  write_raw_header(p.path, R"({"keys": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8], "strides": [1]}})", 8);
  EXPECT_CONTAINS(open_error(p.path), "tensor 'keys' has unknown field 'strides'");
  write_raw_header(p.path, R"({"keys": {"dtype": "F32", "data_offsets": [0, 8]}})", 8);
  EXPECT_CONTAINS(open_error(p.path), "tensor 'keys' has no 'shape' field");
  write_raw_header(p.path, R"({"keys": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}})", 8);
  EXPECT_CONTAINS(open_error(p.path), "tensor 'keys' shape[0] = -2 is not an integer >= 0");
  write_raw_header(p.path, R"({"keys": {"dtype": "F32", "shape": [1,1,1,1,1,1,1,1,1], "data_offsets": [0, 4]}})", 4);
  EXPECT_CONTAINS(open_error(p.path), "has rank 9; at most 8");
  write_raw_header(p.path,
                   R"({"keys": {"dtype": "F32", "shape": [4294967296, 4294967296], "data_offsets": [0, 4]}})", 4);
  EXPECT_CONTAINS(open_error(p.path), "elements");
  write_raw_header(p.path, R"({"__metadata__": {"kvsim_trace": 1}})", 0);
  EXPECT_CONTAINS(open_error(p.path), "__metadata__ key 'kvsim_trace' is a JSON number; metadata values must be strings");
}

TEST(TraceFileErrors, OverlappingTensors) {
  TempPath p("overlap.safetensors");
  write_raw_header(p.path,
                   R"({"keys": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                       "values": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
                   12);
  EXPECT_CONTAINS(open_error(p.path), "tensor 'values' data_offsets [4, 12] overlap tensor 'keys' [0, 8]");
}

TEST(TraceFileErrors, SizeDisagreesWithSpan) {
  TempPath p("span.safetensors");
  write_raw_header(p.path, R"({"queries": {"dtype": "F16", "shape": [2, 3], "data_offsets": [0, 10]}})", 10);
  EXPECT_CONTAINS(open_error(p.path),
                  "tensor 'queries' has shape [2, 3] of dtype F16 = 12 bytes, but data_offsets span 10 bytes");
}

TEST(TraceFileErrors, OffsetsPastDataEnd) {
  TempPath p("past.safetensors");
  write_raw_header(p.path, R"({"keys": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})", 4);
  EXPECT_CONTAINS(open_error(p.path), "tensor 'keys' data_offsets [0, 8] run past the end of the data buffer (4 bytes");
  write_raw_header(p.path, R"({"keys": {"dtype": "F32", "shape": [0], "data_offsets": [8, 4]}})", 8);
  EXPECT_CONTAINS(open_error(p.path), "data_offsets [8, 4] begin after they end");
}

// ---------------------------------------------------------------------------------------------------
// Trace-level errors

TEST(TraceFileErrors, HandBuiltBaseIsValid) {
  TempPath p("hand.safetensors");
  HandTrace h;
  h.metadata["format"] = "pt";  // other metadata keys are ignored
  h.write(p.path);
  EXPECT_EQ(open_error(p.path), "(opened)");
}

TEST(TraceFileErrors, KeysHeadDimDisagreesWithModel) {
  TempPath p("headdim.safetensors");
  HandTrace h;
  h["keys"].decl.shape = {3, 2, 12, 4};
  h.write(p.path);
  EXPECT_CONTAINS(open_error(p.path), "keys: tensor has shape [3, 2, 12, 4]: dimension 3 (head_dim "
                                      "(kvsim_trace.model.head_dim)) is 4 but must be 8");
}

TEST(TraceFileErrors, WrongDtypes) {
  TempPath p("dtypes.safetensors");
  HandTrace h;
  h["queries"].decl.dtype = StDType::F32;
  h.write(p.path);
  EXPECT_CONTAINS(open_error(p.path), "queries: tensor has dtype F32 but keys have F16");
  HandTrace i;
  i["keys"].decl.dtype = StDType::I16;
  i.write(p.path);
  EXPECT_CONTAINS(open_error(p.path), "keys: tensor has dtype I16; allowed: F32, F16, BF16");
  HandTrace j;
  j["token_ids"].decl.dtype = StDType::F32;
  j.write(p.path);
  EXPECT_CONTAINS(open_error(p.path), "token_ids: tensor has dtype F32; allowed: I32, I64");
}

TEST(TraceFileErrors, TokenIdsOutsideInt32) {
  TempPath p("ids.safetensors");
  HandTrace h;
  std::vector<int64_t> ids(12, 3);
  ids[7] = -(int64_t(1) << 40);  // would wrap to 0 if narrowed unchecked
  h["token_ids"] = {{"token_ids", StDType::I64, {12}}, std::string(reinterpret_cast<const char*>(ids.data()), 96)};
  h.write(p.path);
  EXPECT_CONTAINS(open_error(p.path), "token_ids[7]: value -1099511627776 is outside 0 .. 2147483647");
}

TEST(TraceFileErrors, UnknownAndMissingTensors) {
  TempPath p("names.safetensors");
  HandTrace h;
  h.tensors.push_back({{"valuse", StDType::F16, {3, 2, 12, 8}}, ""});
  h.write(p.path);
  const std::string msg = open_error(p.path);
  EXPECT_CONTAINS(msg, "valuse: unknown tensor (did you mean 'values'?)");
  EXPECT_CONTAINS(msg, "keys, values, queries, query_positions, token_ids, surprisal, entropy, varentropy");
  HandTrace i;
  i.tensors.erase(i.tensors.begin() + 2);  // keys
  i.write(p.path);
  EXPECT_CONTAINS(open_error(p.path), "keys: tensor is missing");
}

TEST(TraceFileErrors, MetadataWithoutKvsimTrace) {
  TempPath p("nometa.safetensors");
  HandTrace h;
  h.with_kvsim_trace = false;
  h.metadata["format"] = "pt";
  h.write(p.path);
  EXPECT_CONTAINS(open_error(p.path), "__metadata__: has no 'kvsim_trace' key (keys present: format)");
  h.metadata["kvsim_trac"] = "{}";
  h.write(p.path);
  EXPECT_CONTAINS(open_error(p.path), "(did you mean 'kvsim_trac'?)");
}

TEST(TraceFileErrors, MetadataJsonProblems) {
  TempPath p("metajson.safetensors");
  HandTrace h;
  h.with_kvsim_trace = false;
  h.metadata["kvsim_trace"] = "{\"schema\": 1,";
  h.write(p.path);
  EXPECT_CONTAINS(open_error(p.path), "__metadata__.kvsim_trace: is not valid JSON at byte");

  HandTrace i;
  i.meta["promt_tokens"] = 8;
  i.write(p.path);
  EXPECT_CONTAINS(open_error(p.path), "kvsim_trace.promt_tokens: unknown key (did you mean 'prompt_tokens'?)");

  HandTrace j;
  j.meta["model"]["heads"] = "four";
  j.write(p.path);
  EXPECT_CONTAINS(open_error(p.path), "kvsim_trace.model.heads: is \"four\"; it must be an integer");

  HandTrace k;
  k.meta["schema"] = 2;
  k.meta["new_field"] = true;
  k.write(p.path);
  EXPECT_CONTAINS(open_error(p.path), "kvsim_trace.schema: version 2 is not supported");

  HandTrace l;
  l.meta.erase("sentence_starts");
  l.write(p.path);
  EXPECT_CONTAINS(open_error(p.path), "kvsim_trace.sentence_starts: is missing");
}

TEST(TraceFileErrors, QueryPositionsDisagreeWithQueries) {
  TempPath p("steps.safetensors");
  HandTrace h;
  const std::vector<int64_t> pos = {8, 9, 10, 11};
  h["query_positions"] = {{"query_positions", StDType::I64, {4}}, std::string(reinterpret_cast<const char*>(pos.data()), 32)};
  h.write(p.path);
  EXPECT_CONTAINS(open_error(p.path), "queries: tensor has shape [3, 4, 5, 8]: dimension 2 (steps (query_positions "
                                      "has 4)) is 5 but must be 4");
}

TEST(TraceFileErrors, QueryHeadOutsideStoredKvGroups) {
  TempPath p("gqa.safetensors");
  HandTrace h;
  h.meta["kv_heads"] = {0};
  h["keys"].decl.shape = {3, 1, 12, 8};
  h.write(p.path);
  EXPECT_CONTAINS(open_error(p.path), "kvsim_trace.query_heads[2]: query head 2 reads KV head 1 (group size 2), "
                                      "which kv_heads does not store");
}

TEST(TraceFileErrors, UnsortedLayers) {
  TempPath p("unsorted.safetensors");
  HandTrace h;
  h.meta["layers"] = {0, 3, 1};
  h.write(p.path);
  EXPECT_CONTAINS(open_error(p.path), "kvsim_trace.layers[2]: value 1 does not follow 3; the list must be strictly increasing");
}

TEST(TraceFileErrors, NanInKeysFoundOnLayerAccess) {
  TempPath p("nan.safetensors");
  write_trace(p.path, *random_trace(tiny_meta(), true, 5), DType::fp16);
  // keys[slot 1][kv slot 1][token 3][element 2]
  const uint16_t nan16 = 0x7e00;
  patch_tensor(p.path, "keys", ((size_t(1) * 2 + 1) * 12 + 3) * 8 * 2 + 2 * 2, &nan16, 2);
  const auto tf = TraceFile::open(p.path);  // not scanned at open
  std::vector<float> row(12 * 8);
  tf->keys(0, 1, 0, 12, row.data());        // layer slot 0 is clean
  tf->queries(2, 3, 0, 5, row.data());      // so is slot 2
  const std::string expect =
      "keys: layer slot 1 (model layer 1), KV head slot 1 (KV head 1), token 3, element 2: value is nan";
  for (int attempt = 0; attempt < 2; ++attempt) {  // still refused the second time
    try {
      tf->queries(1, 0, 0, 1, row.data());  // any read of the layer triggers the scan
      ADD_FAILURE() << "no error";
    } catch (const InputError& e) {
      EXPECT_CONTAINS(e.what(), expect);
    }
  }
  try {
    tf->check_finite_all();
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_CONTAINS(e.what(), expect);
  }
}

TEST(TraceFileErrors, InfInQueriesNamesStepAndPosition) {
  TempPath p("infq.safetensors");
  write_trace(p.path, *random_trace(tiny_meta(), false, 5), DType::fp32);
  const float inf = -INFINITY;
  patch_tensor(p.path, "queries", ((size_t(2) * 4 + 3) * 5 + 4) * 8 * 4, &inf, 4);
  const auto tf = TraceFile::open(p.path);
  try {
    tf->check_finite_layer(2);
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_CONTAINS(e.what(), "queries: layer slot 2 (model layer 3), query head slot 3 (query head 3), step 4 "
                              "(token 11), element 0: value is -inf");
  }
}

TEST(TraceFileErrors, InfInSurprisal) {
  TempPath p("infs.safetensors");
  write_trace(p.path, *random_trace(tiny_meta(), false, 5), DType::bf16);
  const float inf = INFINITY;
  patch_tensor(p.path, "surprisal", 4 * 4, &inf, 4);
  EXPECT_CONTAINS(open_error(p.path), "surprisal[4]: value is inf");
}

TEST(TraceFileErrors, ShardsWithOverlappingLayers) {
  TempPath dir("overlapshards");
  fs::create_directories(dir.path);
  TraceMeta a = tiny_meta(), b = tiny_meta();
  a.layers = {0, 1};
  b.layers = {1, 3};
  write_trace(dir.path + "/a.safetensors", *random_trace(a, false, 1), DType::fp16);
  write_trace(dir.path + "/b.safetensors", *random_trace(b, false, 2), DType::fp16);
  const std::string msg = open_error(dir.path);
  EXPECT_CONTAINS(msg, "b.safetensors: kvsim_trace.layers: layer 1 is stored both here and in");
  EXPECT_CONTAINS(msg, "shards must hold disjoint layers");
}

TEST(TraceFileErrors, ShardsThatDisagree) {
  TempPath dir("disagree");
  fs::create_directories(dir.path);
  TraceMeta a = tiny_meta(), b = tiny_meta();
  a.layers = {0};
  b.layers = {1, 3};
  b.model.rope_theta = 500000;
  write_trace(dir.path + "/a.safetensors", *random_trace(a, false, 1), DType::fp16);
  write_trace(dir.path + "/b.safetensors", *random_trace(b, false, 2), DType::fp16);
  EXPECT_CONTAINS(open_error(dir.path), "kvsim_trace.model.rope_theta: is 500000.0 here but 10000.0 in");

  b.model.rope_theta = 10000;
  write_trace(dir.path + "/b.safetensors", *random_trace(b, false, 2), DType::bf16);
  EXPECT_CONTAINS(open_error(dir.path), "keys: dtype BF16 here but F16 in");

  MemoryTrace other(b, [] {
    TraceTokens t = tiny_tokens(true);
    t.token_ids[5] = 99;
    return t;
  }(), false);
  write_trace(dir.path + "/b.safetensors", other, DType::fp16);
  EXPECT_CONTAINS(open_error(dir.path), "token_ids[5]: is 99 here but 36 in");

  TempPath empty("emptydir");
  fs::create_directories(empty.path);
  EXPECT_CONTAINS(open_error(empty.path), "is a directory without *.safetensors files");
  EXPECT_CONTAINS(open_error(empty.path + "/missing.safetensors"), "cannot open");
}

// ---------------------------------------------------------------------------------------------------
// Robustness: truncation and corruption give InputError, never a crash or another exception.

void expect_input_error_or_success(const std::string& path, const std::string& what) {
  try {
    const auto tf = TraceFile::open(path);
    std::vector<float> buf(12 * 8);
    tf->check_finite_all();
    for (int l = 0; l < int(tf->meta().layers.size()); ++l)
      for (int h = 0; h < int(tf->meta().kv_heads.size()); ++h) tf->keys(l, h, 0, tf->tokens_count(), buf.data());
  } catch (const InputError&) {
  } catch (const std::exception& e) {
    ADD_FAILURE() << what << ": " << typeid(e).name() << ": " << e.what();
  }
}

TEST(TraceFileRobustness, TruncationAndCorruptionNeverCrash) {
  TempPath src("fuzzsrc.safetensors"), p("fuzz.safetensors");
  write_trace(src.path, *random_trace(tiny_meta(), true, 9), DType::fp16);
  const std::string good = read_bytes(src.path);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | uint8_t(good[size_t(i)]);
  const size_t header_end = size_t(8 + n);

  for (size_t len = 0; len < good.size(); len += (len < header_end + 16 ? 1 : 97)) {
    write_bytes(p.path, good.substr(0, len));
    expect_input_error_or_success(p.path, "truncated to " + std::to_string(len));
  }
  std::mt19937 rng(1234);
  for (int i = 0; i < 600; ++i) {
    std::string bad = good;
    const int flips = 1 + int(rng() % 3);
    for (int f = 0; f < flips; ++f) {
      const size_t at = rng() % header_end;
      bad[at] = char(uint8_t(bad[at]) ^ uint8_t(1u << (rng() % 8)));
    }
    write_bytes(p.path, bad);
    expect_input_error_or_success(p.path, "flip " + std::to_string(i));
  }
  // Data bytes may hold anything: NaN patterns are found, nothing else matters.
  for (int i = 0; i < 50; ++i) {
    std::string bad = good;
    for (int f = 0; f < 20; ++f) bad[header_end + rng() % (good.size() - header_end)] = char(rng());
    write_bytes(p.path, bad);
    expect_input_error_or_success(p.path, "data scramble " + std::to_string(i));
  }
}

// ---------------------------------------------------------------------------------------------------
// The specification's own example (docs/trace-format.md, section 6) writes a trace we accept.

TEST(TraceFileSpec, PythonExampleIsValid) {
  if (std::system("command -v python3 >/dev/null 2>&1") != 0) GTEST_SKIP() << "python3 not available";
  std::ifstream in(std::string(KVSIM_SOURCE_DIR) + "/docs/trace-format.md");
  std::string line, code;
  bool in_section = false, in_block = false;
  while (std::getline(in, line)) {
    if (line.rfind("## ", 0) == 0) in_section = line.rfind("## 6.", 0) == 0;
    if (!in_section) continue;
    if (!in_block && line == "```python") { in_block = true; continue; }
    if (in_block && line == "```") break;
    if (in_block) code += line + "\n";
  }
  ASSERT_FALSE(code.empty()) << "no python block in section 6 of docs/trace-format.md";
  TempPath dir("pyexample");
  fs::create_directories(dir.path);
  std::ofstream(dir.path + "/example.py") << code;
  ASSERT_EQ(std::system(("cd '" + dir.path + "' && python3 example.py").c_str()), 0);
  const auto tf = TraceFile::open(dir.path + "/toy.safetensors");
  EXPECT_EQ(tf->tokens().token_ids, (std::vector<int32_t>{5, 9, 2, 7}));
  EXPECT_EQ(tf->tokens().query_positions, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(tf->meta().prompt_tokens, 3);
  float k[2], q[2];
  tf->keys(0, 0, 3, 4, k);
  tf->queries(0, 1, 1, 2, q);
  EXPECT_EQ(k[0], 0.5f);
  EXPECT_EQ(q[0], -1.0f);
  EXPECT_EQ(q[1], 1.0f);
  EXPECT_EQ(tf->kv_slot_of_query(1), 0);
}

// ---------------------------------------------------------------------------------------------------
// Lazy reading: a ~1 GiB sparse trace (holes read as zeros) is opened and one layer read; resident
// memory grows by about that layer, not by the file.

size_t resident_bytes() {
  std::ifstream in("/proc/self/statm");
  size_t size = 0, resident = 0;
  in >> size >> resident;
  return resident * size_t(::sysconf(_SC_PAGESIZE));
}

TEST(TraceFileMemory, OpeningAndReadingOneLayerStaysSmall) {
  TempPath p("sparse.safetensors");
  const int64_t L = 32, H = 8, T = 16384, S = 16, d = 64;
  TraceMeta m;
  m.model = {"sparse", int(L), int(H), int(H), int(d), 10000.0, "fp16"};
  for (int i = 0; i < L; ++i) m.layers.push_back(i);
  for (int i = 0; i < H; ++i) m.kv_heads.push_back(i), m.query_heads.push_back(i);
  m.prompt_tokens = T - S;
  m.sentence_starts = {0};
  std::vector<int64_t> pos;
  for (int64_t s = 0; s < S; ++s) pos.push_back(T - S + s);

  const std::vector<SafetensorsDecl> decls = {{"query_positions", StDType::I64, {S}},
                                              {"token_ids", StDType::I32, {T}},
                                              {"keys", StDType::F16, {L, H, T, d}},
                                              {"values", StDType::F16, {L, H, T, d}},
                                              {"queries", StDType::F16, {L, H, S, d}}};
  const SafetensorsLayout lay = plan_safetensors(decls, {{"kvsim_trace", trace_meta_to_json(m).dump()}});
  {
    std::ofstream out(p.path, std::ios::binary);
    out << lay.prefix;
    out.write(reinterpret_cast<const char*>(pos.data()), std::streamsize(pos.size() * 8));
  }
  fs::resize_file(p.path, lay.file_size());  // everything else: holes, read as zeros
  ASSERT_GT(lay.file_size(), uint64_t(1) << 30);

  const auto tf = TraceFile::open(p.path);
  std::vector<float> buf(size_t(T * d), 1.0f);  // allocated and touched before measuring
  const size_t before = resident_bytes();
  for (int h = 0; h < H; ++h) {
    tf->keys(5, h, 0, T, buf.data());
    EXPECT_EQ(buf[size_t(T * d - 1)], 0.0f);
    tf->values(5, h, 0, T, buf.data());
  }
  const size_t grew = resident_bytes() - std::min(before, resident_bytes());
  const size_t layer_bytes = size_t(2 * H * T * d * 2);  // keys + values of one layer: 32 MiB
  RecordProperty("resident_growth_bytes", std::to_string(grew));
  EXPECT_LT(grew, size_t(lay.file_size() / 8)) << "resident memory grew by " << grew << " bytes";
  // The layer was really read (mapped pages count as resident); allow for pages already mapped.
  EXPECT_GT(grew, layer_bytes / 4) << "resident memory grew by only " << grew << " bytes";
}

}  // namespace
}  // namespace kvsim
