// A GGUF (v2/v3) file, memory-mapped and validated, as llama.cpp writes them: a header, metadata
// key/value pairs, tensor descriptions and an aligned data section. Every count, length, dimension
// and offset is checked against the file's size and sane limits before it is used, so a truncated or
// hostile file gives an InputError naming the file and the field, never a crash.
//
// Tensor dimensions are GGML's: dims[0] is the innermost (contiguous) one, so a weight of an
// `in -> out` projection has dims {in, out} and is stored as `out` rows of `in` values.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace kvsim::llm {

// GGML tensor element types (the numbering is the file format's).
enum class GgmlType : uint32_t {
  F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
  Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15, BF16 = 30,
};

// Elements per block and bytes per block; false for a type number this reader does not know.
bool ggml_type_layout(uint32_t type, int64_t* block_elems, int64_t* block_bytes);
std::string ggml_type_name(uint32_t type);
// Whether dequantize_row() can convert this type to float.
bool ggml_type_dequantizable(uint32_t type);

// Converts `n` elements (a multiple of the type's block size) starting at `src` to float. Throws
// std::invalid_argument for a type it cannot convert (callers check ggml_type_dequantizable first).
void dequantize_row(GgmlType type, const uint8_t* src, float* dst, int64_t n);

// Metadata value types (the file format's numbering).
enum class GgufValueType : uint32_t {
  U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, BOOL = 7, STRING = 8, ARRAY = 9,
  U64 = 10, I64 = 11, F64 = 12,
};
std::string gguf_value_type_name(GgufValueType t);

struct GgufValue {
  GgufValueType type = GgufValueType::U8;
  // Scalars: integers in `i` (u64 values above INT64_MAX are kept in `u` too), floats in `f`,
  // bools as 0/1 in `i`, strings in `s`.
  int64_t i = 0;
  uint64_t u = 0;
  double f = 0;
  std::string s;
  // Arrays: element type, and the elements (strings in `strs`, numbers in `nums`, nested arrays in
  // `items`).
  GgufValueType elem = GgufValueType::U8;
  std::vector<std::string> strs;
  std::vector<double> nums;
  std::vector<GgufValue> items;
  bool is_integer() const;
  bool is_float() const { return type == GgufValueType::F32 || type == GgufValueType::F64; }
};

struct GgufTensor {
  std::string name;
  std::vector<int64_t> dims;  // dims[0] innermost
  uint32_t type = 0;
  uint64_t offset = 0;  // from the start of the data section
  uint64_t bytes = 0;
  const uint8_t* data = nullptr;  // into the mapping
  int64_t elements() const;
  int64_t rows() const { return dims.empty() ? 0 : elements() / dims[0]; }
};

class GgufFile {
 public:
  // Maps and validates the whole file. Throws InputError.
  explicit GgufFile(const std::string& path);
  // Reads a GGUF image already in memory (not copied: it must outlive this object); `name` stands
  // for the file in errors.
  GgufFile(const std::string& name, const void* data, size_t size);
  ~GgufFile();
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  const std::map<std::string, GgufValue>& metadata() const { return kv_; }
  const std::vector<GgufTensor>& tensors() const { return tensors_; }

  bool has(const std::string& key) const { return kv_.count(key) != 0; }
  const GgufValue* find(const std::string& key) const;
  // Typed lookups; they throw an InputError naming "metadata 'key'" when the key is missing (unless a
  // default is given) or holds the wrong type or an out-of-range value.
  int64_t get_int(const std::string& key) const;
  int64_t get_int(const std::string& key, int64_t dflt) const;
  double get_float(const std::string& key) const;  // accepts integer values too
  double get_float(const std::string& key, double dflt) const;
  std::string get_string(const std::string& key) const;
  std::string get_string(const std::string& key, const std::string& dflt) const;
  const std::vector<std::string>& get_string_array(const std::string& key) const;
  const std::vector<double>& get_number_array(const std::string& key) const;

  const GgufTensor* find_tensor(const std::string& name) const;
  const GgufTensor& tensor(const std::string& name) const;  // InputError when absent
  // The tensor converted to float, row-major as stored (dims[0] contiguous). InputError when its type
  // cannot be converted.
  std::vector<float> dequantize(const GgufTensor& t) const;

  // Throws an InputError about this file: "path: field: message".
  [[noreturn]] void fail(const std::string& field, const std::string& message) const;

 private:
  std::string path_;
  const uint8_t* base_ = nullptr;
  size_t size_ = 0;
  bool mapped_ = false;  // base_ is our mmap (unmapped in the destructor)
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  std::map<std::string, GgufValue> kv_;
  std::vector<GgufTensor> tensors_;
  std::map<std::string, size_t> tensor_index_;
  void parse();
};

}  // namespace kvsim::llm
