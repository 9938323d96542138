// The safetensors container (https://github.com/huggingface/safetensors), which trace files use:
//
//   [8 bytes]  N, little-endian u64
//   [N bytes]  UTF-8 JSON header: {"NAME": {"dtype": "F16", "shape": [..], "data_offsets": [b, e]}, ...,
//                                  "__metadata__": {"key": "string value", ...}}
//   [rest]     the data buffer; data_offsets are relative to its start
//
// Reading maps the file and validates the whole header before any tensor data is touched, so a
// truncated or hostile file is rejected with a specific message instead of being read out of bounds.
// Tensor data is never copied: TensorView points into the mapping, and the kernel pages in only what
// a reader touches (a 60 GB trace can be opened to read one layer). Writing streams each tensor
// through a callback, so a writer never holds a whole tensor either.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/input_limits.hpp"

namespace kvsim {

// Every dtype the safetensors format defines. Trace files use only a few of them, but a reader that
// knows the rest can say "dtype I8 is not allowed here" instead of "unknown dtype".
enum class StDType { BOOL, U8, I8, F8_E5M2, F8_E4M3, I16, U16, F16, BF16, I32, U32, F32, F64, I64, U64 };

size_t st_dtype_size(StDType t);
std::string_view st_dtype_name(StDType t);
bool parse_st_dtype(std::string_view s, StDType& out);  // false for an unknown name
std::vector<std::string> st_dtype_names();

// Bounds that keep a hostile header from making us allocate or loop without limit. Real files are far
// inside them. The defaults come from the environment (core/input_limits.hpp: KVSIM_MAX_HEADER_BYTES,
// KVSIM_MAX_TENSORS, KVSIM_MAX_TENSOR_ELEMENTS), read when the struct is made.
struct SafetensorsLimits {
  uint64_t max_header_bytes = input_limit(InputLimit::header_bytes);
  size_t max_tensors = size_t(input_limit(InputLimit::tensors));
  size_t max_rank = 8;  // the format's own bound on a tensor's dimensions; not configurable
  uint64_t max_elements = input_limit(InputLimit::tensor_elements);  // per tensor
};

// A whole file mapped read-only. Move-only; unmaps on destruction. An empty file has data() == nullptr.
class MappedFile {
 public:
  MappedFile() = default;
  // Throws InputError naming `path` when it cannot be opened, is not a regular file or cannot be mapped.
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(MappedFile&& o) noexcept;
  MappedFile& operator=(MappedFile&& o) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::byte* data() const { return data_; }
  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  const std::byte* data_ = nullptr;
  uint64_t size_ = 0;
  void release() noexcept;
};

struct SafetensorsEntry {
  std::string name;
  StDType dtype = StDType::F32;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  // data_offsets, relative to the data buffer
  uint64_t numel() const;
};

struct SafetensorsHeader {
  uint64_t file_size = 0;
  uint64_t header_bytes = 0;  // N
  uint64_t data_start = 0;    // 8 + N: where the data buffer begins in the file
  std::vector<SafetensorsEntry> tensors;        // in data order (sorted by begin)
  std::map<std::string, std::string> metadata;  // __metadata__; empty when absent
  const SafetensorsEntry* find(std::string_view name) const;  // nullptr when absent
};

// Validates the header of `file` completely (see the .cpp for every check); `path` names the file in
// errors. Throws InputError.
SafetensorsHeader parse_safetensors(const MappedFile& file, const std::string& path,
                                    const SafetensorsLimits& limits = {});

// A zero-copy view of one tensor's bytes inside a mapping.
struct TensorView {
  std::string name;
  StDType dtype = StDType::F32;
  std::vector<int64_t> shape;
  const std::byte* data = nullptr;
  size_t bytes = 0;
  uint64_t numel() const { return bytes / st_dtype_size(dtype); }
};

// The view of `entry` in `file` (which `header` was parsed from).
TensorView tensor_view(const MappedFile& file, const SafetensorsHeader& header, const SafetensorsEntry& entry);

// "[2, 3, 4]"
std::string shape_string(const std::vector<int64_t>& shape);

// One tensor a writer will write.
struct SafetensorsDecl {
  std::string name;
  StDType dtype = StDType::F32;
  std::vector<int64_t> shape;
  uint64_t bytes() const;
};

// The bytes that precede the data buffer (8-byte length + JSON header padded with spaces so that the
// data starts 8-byte aligned), each tensor's data offset, and the whole file's size, for tensors laid
// out back to back in declaration order. Exposed so tests can build files by hand (e.g. sparse ones).
struct SafetensorsLayout {
  std::string prefix;
  std::vector<uint64_t> begins;  // per declaration, relative to the data buffer
  uint64_t data_bytes = 0;
  uint64_t file_size() const { return prefix.size() + data_bytes; }
};
SafetensorsLayout plan_safetensors(const std::vector<SafetensorsDecl>& tensors,
                                   const std::map<std::string, std::string>& metadata);

// Streams a safetensors file. Usage: declare every tensor and metadata entry, then call
// write_tensor() once per tensor in declaration order, then commit(). The file is written to
// `path + ".tmp.<pid>"` and renamed over `path` only by commit(); destroying the writer without
// commit() removes the temporary file, so a failure never leaves a partial file at `path`. commit()
// fsyncs the file before the rename and the directory after it (core/durable.hpp), so a committed
// trace also survives a power cut.
class SafetensorsWriter {
 public:
  // Receives the tensor's bytes, in order, in pieces of any size.
  using Sink = std::function<void(const void* data, size_t bytes)>;

  explicit SafetensorsWriter(std::string path);
  ~SafetensorsWriter();
  SafetensorsWriter(const SafetensorsWriter&) = delete;
  SafetensorsWriter& operator=(const SafetensorsWriter&) = delete;

  void add_tensor(std::string name, StDType dtype, std::vector<int64_t> shape);
  void set_metadata(const std::string& key, const std::string& value);
  uint64_t file_size() const;  // after all add_tensor calls

  // Writes the next declared tensor (which must be `name`): `produce` pushes exactly its byte size
  // into the sink. The first call writes the header.
  void write_tensor(const std::string& name, const std::function<void(const Sink&)>& produce);
  void commit();

 private:
  std::string path_, tmp_;
  std::vector<SafetensorsDecl> decls_;
  std::map<std::string, std::string> metadata_;
  int fd_ = -1;
  size_t next_ = 0;  // index of the next tensor to write
  bool committed_ = false;
  std::vector<char> buf_;
  size_t buf_used_ = 0;
  void open_and_write_header();
  void append(const void* data, size_t bytes);
  void flush();
};

}  // namespace kvsim
