#include "traces/format/safetensors.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>
#include <fcntl.h>
#include <stdexcept>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "core/durable.hpp"
#include "core/error.hpp"

namespace kvsim {

namespace {

struct DTypeInfo {
  StDType type;
  const char* name;
  size_t size;
};
constexpr DTypeInfo kDTypes[] = {
    {StDType::BOOL, "BOOL", 1}, {StDType::U8, "U8", 1},     {StDType::I8, "I8", 1},
    {StDType::F8_E5M2, "F8_E5M2", 1}, {StDType::F8_E4M3, "F8_E4M3", 1}, {StDType::I16, "I16", 2},
    {StDType::U16, "U16", 2},   {StDType::F16, "F16", 2},   {StDType::BF16, "BF16", 2},
    {StDType::I32, "I32", 4},   {StDType::U32, "U32", 4},   {StDType::F32, "F32", 4},
    {StDType::F64, "F64", 8},   {StDType::I64, "I64", 8},   {StDType::U64, "U64", 8},
};

const DTypeInfo& info(StDType t) {
  for (const auto& d : kDTypes)
    if (d.type == t) return d;
  throw std::logic_error("unknown StDType");
}

uint64_t read_le64(const std::byte* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | uint64_t(p[i]);
  return v;
}

std::string offsets_string(uint64_t b, uint64_t e) {
  std::string s = "[";  // built by appending: GCC 12 warns falsely (-Wrestrict) on "[" + std::string&&
  s += std::to_string(b);
  s += ", ";
  s += std::to_string(e);
  return s + "]";
}

[[noreturn]] void header_error(const std::string& path, const std::string& message) {
  throw_input_error(path, 0, "header", message);
}

// A JSON non-negative integer that fits in int64 (shape dimensions, offsets), else false.
bool as_count(const nlohmann::json& j, uint64_t& out) {
  if (j.is_number_unsigned()) {
    out = j.get<uint64_t>();
    return out <= uint64_t(INT64_MAX);
  }
  if (j.is_number_integer()) {
    const int64_t v = j.get<int64_t>();
    if (v < 0) return false;
    out = uint64_t(v);
    return true;
  }
  return false;
}

SafetensorsEntry parse_entry(const std::string& name, const nlohmann::json& e, const std::string& path,
                             uint64_t data_size, const SafetensorsLimits& limits) {
  const std::string t = "tensor '" + name + "'";
  if (!e.is_object())
    header_error(path, t + " is a JSON " + std::string(e.type_name()) +
                           "; each tensor entry must be an object with dtype, shape and data_offsets");
  for (const auto& [k, v] : e.items()) {
    (void)v;
    if (k != "dtype" && k != "shape" && k != "data_offsets")
      header_error(path, t + " has unknown field '" + k + "'" +
                             suggestion(k, {"dtype", "shape", "data_offsets"}) +
                             "; allowed: dtype, shape, data_offsets");
  }
  for (const char* k : {"dtype", "shape", "data_offsets"})
    if (!e.contains(k)) header_error(path, t + " has no '" + std::string(k) + "' field");

  SafetensorsEntry out;
  out.name = name;
  const auto& dt = e["dtype"];
  if (!dt.is_string()) header_error(path, t + " dtype is a JSON " + std::string(dt.type_name()) + "; it must be a string");
  const std::string dts = dt.get<std::string>();
  if (!parse_st_dtype(dts, out.dtype))
    header_error(path, t + " has unknown dtype '" + dts + "'" + suggestion(dts, st_dtype_names()) +
                           "; known: " + join(st_dtype_names()));

  const auto& sh = e["shape"];
  if (!sh.is_array()) header_error(path, t + " shape is a JSON " + std::string(sh.type_name()) + "; it must be an array");
  if (sh.size() > limits.max_rank)
    header_error(path, t + " has rank " + std::to_string(sh.size()) + "; at most " + std::to_string(limits.max_rank) +
                           " dimensions are allowed");
  uint64_t numel = 1;
  for (size_t i = 0; i < sh.size(); ++i) {
    uint64_t dim = 0;
    if (!as_count(sh[i], dim))
      header_error(path, t + " shape[" + std::to_string(i) + "] = " + sh[i].dump() +
                             " is not an integer >= 0");
    out.shape.push_back(int64_t(dim));
    if (dim != 0 && numel > limits.max_elements / dim)  // numel * dim > max_elements, without overflow
      header_error(path, limit_exceeded(InputLimit::tensor_elements, t + " shape " + sh.dump() + ": element count",
                                        numel > UINT64_MAX / dim ? UINT64_MAX : numel * dim, limits.max_elements));
    numel *= dim;
  }
  if (numel > limits.max_elements)
    header_error(path, limit_exceeded(InputLimit::tensor_elements, t + " shape " + sh.dump() + ": element count",
                                      numel, limits.max_elements));

  const auto& off = e["data_offsets"];
  if (!off.is_array() || off.size() != 2)
    header_error(path, t + " data_offsets = " + off.dump() + " must be an array of two integers [begin, end]");
  if (!as_count(off[0], out.begin) || !as_count(off[1], out.end))
    header_error(path, t + " data_offsets = " + off.dump() + " must be two integers >= 0");
  if (out.begin > out.end)
    header_error(path, t + " data_offsets " + offsets_string(out.begin, out.end) + " begin after they end");
  if (out.end > data_size)
    header_error(path, t + " data_offsets " + offsets_string(out.begin, out.end) +
                           " run past the end of the data buffer (" + std::to_string(data_size) +
                           " bytes; is the file truncated?)");
  const uint64_t bytes = numel * st_dtype_size(out.dtype);  // numel <= 2^48, size <= 8: no overflow
  if (out.end - out.begin != bytes)
    header_error(path, t + " has shape " + shape_string(out.shape) + " of dtype " + dts + " = " +
                           std::to_string(bytes) + " bytes, but data_offsets span " +
                           std::to_string(out.end - out.begin) + " bytes");
  return out;
}

}  // namespace

size_t st_dtype_size(StDType t) { return info(t).size; }
std::string_view st_dtype_name(StDType t) { return info(t).name; }
bool parse_st_dtype(std::string_view s, StDType& out) {
  for (const auto& d : kDTypes)
    if (s == d.name) { out = d.type; return true; }
  return false;
}
std::vector<std::string> st_dtype_names() {
  std::vector<std::string> v;
  for (const auto& d : kDTypes) v.emplace_back(d.name);
  return v;
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// ---------------------------------------------------------------------------------------------------
// MappedFile

MappedFile::MappedFile(const std::string& path) : path_(path) {
  // O_NONBLOCK: opening a FIFO must not hang waiting for a writer; it is rejected below as not regular.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw_input_error(path, 0, "", std::string("cannot open: ") + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    throw_input_error(path, 0, "", std::string("cannot stat: ") + std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw_input_error(path, 0, "", "is not a regular file");
  }
  size_ = uint64_t(st.st_size);
  if (size_ > 0) {
    void* p = ::mmap(nullptr, size_t(size_), PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      throw_input_error(path, 0, "", std::string("cannot map into memory: ") + std::strerror(err));
    }
    data_ = static_cast<const std::byte*>(p);
  }
  ::close(fd);  // the mapping keeps the file alive
}

MappedFile::~MappedFile() { release(); }

void MappedFile::release() noexcept {
  if (data_) ::munmap(const_cast<std::byte*>(data_), size_t(size_));
  data_ = nullptr;
  size_ = 0;
}

MappedFile::MappedFile(MappedFile&& o) noexcept : path_(std::move(o.path_)), data_(o.data_), size_(o.size_) {
  o.data_ = nullptr;
  o.size_ = 0;
}

MappedFile& MappedFile::operator=(MappedFile&& o) noexcept {
  if (this != &o) {
    release();
    path_ = std::move(o.path_);
    data_ = o.data_;
    size_ = o.size_;
    o.data_ = nullptr;
    o.size_ = 0;
  }
  return *this;
}

// ---------------------------------------------------------------------------------------------------
// Reading

uint64_t SafetensorsEntry::numel() const {
  uint64_t n = 1;
  for (int64_t d : shape) n *= uint64_t(d);
  return n;
}

const SafetensorsEntry* SafetensorsHeader::find(std::string_view name) const {
  for (const auto& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

SafetensorsHeader parse_safetensors(const MappedFile& file, const std::string& path, const SafetensorsLimits& limits) {
  SafetensorsHeader h;
  h.file_size = file.size();
  if (h.file_size < 8)
    header_error(path, "file is " + std::to_string(h.file_size) +
                           " bytes; a safetensors file starts with an 8-byte header length");
  h.header_bytes = read_le64(file.data());
  if (h.header_bytes > h.file_size - 8)
    header_error(path, "header length " + std::to_string(h.header_bytes) + " runs past the end of the file (size " +
                           std::to_string(h.file_size) + ")");
  if (h.header_bytes > limits.max_header_bytes)
    header_error(path, limit_exceeded(InputLimit::header_bytes, "header length", h.header_bytes, limits.max_header_bytes));
  h.data_start = 8 + h.header_bytes;
  const uint64_t data_size = h.file_size - h.data_start;
  const std::string_view text(reinterpret_cast<const char*>(file.data()) + 8, size_t(h.header_bytes));

  // Duplicate keys would silently shadow each other in nlohmann::json; nesting beyond what a header
  // needs only costs memory. Both are rejected while parsing.
  std::vector<std::set<std::string>> keys_at_depth;
  const auto callback = [&](int depth, nlohmann::json::parse_event_t ev, nlohmann::json& parsed) {
    using E = nlohmann::json::parse_event_t;
    if (depth > 16) header_error(path, "JSON nests deeper than 16 levels; a safetensors header needs 3");
    if (ev == E::object_start) keys_at_depth.emplace_back();
    if (ev == E::object_end && !keys_at_depth.empty()) keys_at_depth.pop_back();
    if (ev == E::key && !keys_at_depth.empty()) {
      auto& seen = keys_at_depth.back();
      const std::string k = parsed.get<std::string>();
      if (!seen.insert(k).second) header_error(path, "key '" + k + "' appears twice in one JSON object");
      if (seen.size() > limits.max_tensors + 1)
        header_error(path, limit_exceeded(InputLimit::tensors, "entries in one JSON object:", seen.size(),
                                          limits.max_tensors));
    }
    return true;
  };
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text.begin(), text.end(), callback);
  } catch (const nlohmann::json::parse_error& e) {
    header_error(path, "header is not valid JSON at byte " + std::to_string(e.byte) + " of the header (file offset " +
                           std::to_string(8 + e.byte) + "): " + e.what());
  } catch (const nlohmann::json::exception& e) {
    header_error(path, std::string("header is not valid JSON: ") + e.what());
  }
  if (!j.is_object())
    header_error(path, "header is a JSON " + std::string(j.type_name()) +
                           "; it must be an object mapping tensor names to entries");

  for (const auto& [name, e] : j.items()) {
    if (name == "__metadata__") {
      if (!e.is_object())
        header_error(path, "__metadata__ is a JSON " + std::string(e.type_name()) +
                               "; it must be an object of string values");
      for (const auto& [k, v] : e.items()) {
        if (!v.is_string())
          header_error(path, "__metadata__ key '" + k + "' is a JSON " + std::string(v.type_name()) +
                                 "; metadata values must be strings");
        h.metadata[k] = v.get<std::string>();
      }
      continue;
    }
    if (h.tensors.size() >= limits.max_tensors)
      header_error(path, limit_exceeded(InputLimit::tensors, "tensor count", h.tensors.size() + 1, limits.max_tensors));
    h.tensors.push_back(parse_entry(name, e, path, data_size, limits));
  }

  std::sort(h.tensors.begin(), h.tensors.end(), [](const SafetensorsEntry& a, const SafetensorsEntry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  // Sorted by begin, any overlap shows up between neighbours.
  for (size_t i = 1; i < h.tensors.size(); ++i) {
    const auto &a = h.tensors[i - 1], &b = h.tensors[i];
    if (b.begin < a.end)
      header_error(path, "tensor '" + b.name + "' data_offsets " + offsets_string(b.begin, b.end) +
                             " overlap tensor '" + a.name + "' " + offsets_string(a.begin, a.end));
  }
  return h;
}

TensorView tensor_view(const MappedFile& file, const SafetensorsHeader& header, const SafetensorsEntry& e) {
  TensorView v;
  v.name = e.name;
  v.dtype = e.dtype;
  v.shape = e.shape;
  v.bytes = size_t(e.end - e.begin);
  v.data = file.data() ? file.data() + header.data_start + e.begin : nullptr;
  return v;
}

// ---------------------------------------------------------------------------------------------------
// Writing

uint64_t SafetensorsDecl::bytes() const {
  uint64_t n = st_dtype_size(dtype);
  for (int64_t d : shape) n *= uint64_t(d);
  return n;
}

SafetensorsLayout plan_safetensors(const std::vector<SafetensorsDecl>& tensors,
                                   const std::map<std::string, std::string>& metadata) {
  SafetensorsLayout out;
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    nlohmann::ordered_json m = nlohmann::ordered_json::object();
    for (const auto& [k, v] : metadata) m[k] = v;
    j["__metadata__"] = std::move(m);
  }
  for (const auto& t : tensors) {
    for (int64_t d : t.shape)
      if (d < 0) throw std::invalid_argument("safetensors: tensor '" + t.name + "' has a negative dimension");
    if (t.name == "__metadata__" || j.contains(t.name))
      throw std::invalid_argument("safetensors: tensor name '" + t.name + "' is reserved or declared twice");
    const uint64_t b = out.data_bytes, e = b + t.bytes();
    out.begins.push_back(b);
    j[t.name] = {{"dtype", std::string(st_dtype_name(t.dtype))}, {"shape", t.shape}, {"data_offsets", {b, e}}};
    out.data_bytes = e;
  }
  std::string text = j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);  // never throws on bad UTF-8
  // Pad with spaces (valid JSON whitespace) so the data buffer starts 8-byte aligned, as the
  // reference implementation does: readers may then view fp32/i64 data in place.
  text.append((8 - text.size() % 8) % 8, ' ');
  out.prefix.resize(8);
  const uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) out.prefix[size_t(i)] = char((n >> (8 * i)) & 0xff);
  out.prefix += text;
  return out;
}

namespace {
constexpr size_t kWriteBuffer = size_t(4) << 20;
}

SafetensorsWriter::SafetensorsWriter(std::string path)
    : path_(std::move(path)), tmp_(path_ + ".tmp." + std::to_string(::getpid())) {}

SafetensorsWriter::~SafetensorsWriter() {
  if (fd_ >= 0) {  // begun but not committed: the temporary file must not outlive us
    ::close(fd_);
    ::unlink(tmp_.c_str());
  }
}

void SafetensorsWriter::add_tensor(std::string name, StDType dtype, std::vector<int64_t> shape) {
  if (fd_ >= 0 || committed_) throw std::logic_error("SafetensorsWriter: add_tensor after writing began");
  decls_.push_back({std::move(name), dtype, std::move(shape)});
}

void SafetensorsWriter::set_metadata(const std::string& key, const std::string& value) {
  if (fd_ >= 0 || committed_) throw std::logic_error("SafetensorsWriter: set_metadata after writing began");
  metadata_[key] = value;
}

uint64_t SafetensorsWriter::file_size() const { return plan_safetensors(decls_, metadata_).file_size(); }

void SafetensorsWriter::open_and_write_header() {
  const SafetensorsLayout layout = plan_safetensors(decls_, metadata_);
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) throw_input_error(path_, 0, "", std::string("cannot write: ") + std::strerror(errno));
  buf_.resize(kWriteBuffer);
  append(layout.prefix.data(), layout.prefix.size());
}

void SafetensorsWriter::flush() {
  size_t done = 0;
  while (done < buf_used_) {
    const ssize_t w = ::write(fd_, buf_.data() + done, buf_used_ - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) throw_input_error(path_, 0, "", std::string("write failed: ") + std::strerror(errno));
    done += size_t(w);
  }
  buf_used_ = 0;
}

void SafetensorsWriter::append(const void* data, size_t bytes) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const size_t n = std::min(bytes, buf_.size() - buf_used_);
    std::memcpy(buf_.data() + buf_used_, p, n);
    buf_used_ += n, p += n, bytes -= n;
    if (buf_used_ == buf_.size()) flush();
  }
}

void SafetensorsWriter::write_tensor(const std::string& name, const std::function<void(const Sink&)>& produce) {
  if (committed_) throw std::logic_error("SafetensorsWriter: write_tensor after commit");
  if (next_ >= decls_.size() || decls_[next_].name != name)
    throw std::logic_error("SafetensorsWriter: tensor '" + name + "' written out of declaration order");
  if (fd_ < 0) open_and_write_header();
  const uint64_t want = decls_[next_].bytes();
  uint64_t got = 0;
  produce([&](const void* data, size_t bytes) {
    if (got + bytes > want)
      throw std::logic_error("SafetensorsWriter: tensor '" + name + "' given more than its " + std::to_string(want) +
                             " bytes");
    append(data, bytes);
    got += bytes;
  });
  if (got != want)
    throw std::logic_error("SafetensorsWriter: tensor '" + name + "' given " + std::to_string(got) + " of its " +
                           std::to_string(want) + " bytes");
  ++next_;
}

void SafetensorsWriter::commit() {
  if (committed_) return;
  if (next_ != decls_.size())
    throw std::logic_error("SafetensorsWriter: commit with " + std::to_string(decls_.size() - next_) +
                           " tensors unwritten");
  if (fd_ < 0) open_and_write_header();  // no tensors: the header alone
  flush();
  const int fd = fd_;
  fd_ = -1;
  // The data on disk before the name points at it, and the rename itself durable (core/durable.hpp).
  try {
    sync_file(fd, path_);
  } catch (const InputError&) {
    ::close(fd);
    ::unlink(tmp_.c_str());
    throw;
  }
  if (::close(fd) != 0) {
    ::unlink(tmp_.c_str());
    throw_input_error(path_, 0, "", std::string("write failed: ") + std::strerror(errno));
  }
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp_.c_str());
    throw_input_error(path_, 0, "", std::string("cannot replace file: ") + std::strerror(err));
  }
  committed_ = true;
  sync_parent_directory(path_);
}

}  // namespace kvsim
