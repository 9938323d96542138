#include "traces/llm/gguf.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "core/error.hpp"
#include "core/input_limits.hpp"
#include "traces/format/half.hpp"

namespace kvsim::llm {

namespace {

// Tensor, key and string-length limits (core/input_limits.hpp) are far above any real model but low
// enough that a corrupt count cannot make us allocate gigabytes before noticing the file is too short;
// the dimension and nesting bounds are the format's own.
constexpr uint32_t kMaxDims = 4;  // GGML_MAX_DIMS
constexpr int kMaxArrayDepth = 8;

uint16_t rd16(const uint8_t* p) { uint16_t v; std::memcpy(&v, p, 2); return v; }
float h2f(const uint8_t* p) { return fp16_to_float(rd16(p)); }

// Reads little-endian fields from the mapping, failing with the field being read when the file ends.
struct Cursor {
  const GgufFile& file;
  const uint8_t* base;
  size_t size;
  size_t pos = 0;
  size_t remaining() const { return size - pos; }
  void need(size_t n, const std::string& field) const {
    if (n > remaining())
      file.fail(field, "file truncated: needs " + std::to_string(n) + " bytes at offset " +
                           std::to_string(pos) + " but only " + std::to_string(remaining()) + " remain");
  }
  template <class T>
  T read(const std::string& field) {
    need(sizeof(T), field);
    T v;
    std::memcpy(&v, base + pos, sizeof(T));
    pos += sizeof(T);
    return v;
  }
  std::string str(const std::string& field) {
    const uint64_t n = read<uint64_t>(field + " (string length)");
    if (const uint64_t limit = input_limit(InputLimit::string_bytes); n > limit)
      file.fail(field, limit_exceeded(InputLimit::string_bytes, "string length", n, limit));
    if (n > remaining())
      file.fail(field, "string length " + std::to_string(n) + " runs past the end of the file (" +
                           std::to_string(remaining()) + " bytes remain at offset " + std::to_string(pos) + ")");
    std::string s(reinterpret_cast<const char*>(base + pos), size_t(n));
    pos += size_t(n);
    return s;
  }
};

size_t scalar_size(GgufValueType t) {
  switch (t) {
    case GgufValueType::U8: case GgufValueType::I8: case GgufValueType::BOOL: return 1;
    case GgufValueType::U16: case GgufValueType::I16: return 2;
    case GgufValueType::U32: case GgufValueType::I32: case GgufValueType::F32: return 4;
    case GgufValueType::U64: case GgufValueType::I64: case GgufValueType::F64: return 8;
    default: return 0;
  }
}

void read_value(Cursor& c, GgufValueType t, GgufValue& v, const std::string& field, int depth) {
  v.type = t;
  switch (t) {
    case GgufValueType::U8: v.i = c.read<uint8_t>(field); v.u = uint64_t(v.i); return;
    case GgufValueType::I8: v.i = c.read<int8_t>(field); return;
    case GgufValueType::U16: v.i = c.read<uint16_t>(field); v.u = uint64_t(v.i); return;
    case GgufValueType::I16: v.i = c.read<int16_t>(field); return;
    case GgufValueType::U32: v.i = c.read<uint32_t>(field); v.u = uint64_t(v.i); return;
    case GgufValueType::I32: v.i = c.read<int32_t>(field); return;
    case GgufValueType::U64: v.u = c.read<uint64_t>(field); v.i = int64_t(std::min<uint64_t>(v.u, INT64_MAX)); return;
    case GgufValueType::I64: v.i = c.read<int64_t>(field); return;
    case GgufValueType::F32: v.f = c.read<float>(field); return;
    case GgufValueType::F64: v.f = c.read<double>(field); return;
    case GgufValueType::BOOL: {
      const uint8_t b = c.read<uint8_t>(field);
      if (b > 1) c.file.fail(field, "bool value " + std::to_string(b) + " is not 0 or 1");
      v.i = b;
      return;
    }
    case GgufValueType::STRING: v.s = c.str(field); return;
    case GgufValueType::ARRAY: {
      if (depth >= kMaxArrayDepth)
        c.file.fail(field, "arrays nested deeper than " + std::to_string(kMaxArrayDepth) + " levels");
      const uint32_t et = c.read<uint32_t>(field + " (array element type)");
      if (et > uint32_t(GgufValueType::F64))
        c.file.fail(field, "array element type " + std::to_string(et) + " is unknown (allowed: 0-12)");
      v.elem = GgufValueType(et);
      const uint64_t n = c.read<uint64_t>(field + " (array length)");
      // Every element takes at least one byte (a string at least 8), so a longer array cannot fit.
      const size_t min_elem = v.elem == GgufValueType::STRING || v.elem == GgufValueType::ARRAY ? 8 : scalar_size(v.elem);
      if (n > c.remaining() / min_elem)
        c.file.fail(field, "array length " + std::to_string(n) + " of " + gguf_value_type_name(v.elem) +
                               " runs past the end of the file (" + std::to_string(c.remaining()) + " bytes remain)");
      if (v.elem == GgufValueType::STRING) {
        v.strs.reserve(size_t(n));
        for (uint64_t k = 0; k < n; ++k) v.strs.push_back(c.str(field + "[" + std::to_string(k) + "]"));
      } else if (v.elem == GgufValueType::ARRAY) {
        v.items.resize(size_t(n));
        for (uint64_t k = 0; k < n; ++k)
          read_value(c, GgufValueType::ARRAY, v.items[size_t(k)], field + "[" + std::to_string(k) + "]", depth + 1);
      } else {
        v.nums.reserve(size_t(n));
        GgufValue e;
        for (uint64_t k = 0; k < n; ++k) {
          read_value(c, v.elem, e, field, depth + 1);
          v.nums.push_back(e.is_float() ? e.f : e.type == GgufValueType::U64 ? double(e.u) : double(e.i));
        }
      }
      return;
    }
  }
  c.file.fail(field, "value type " + std::to_string(uint32_t(t)) + " is unknown (allowed: 0-12)");
}

}  // namespace

// ---- types and dequantization -------------------------------------------------------------------

bool ggml_type_layout(uint32_t type, int64_t* be, int64_t* bb) {
  int64_t e = 0, b = 0;
  switch (GgmlType(type)) {
    case GgmlType::F32: e = 1; b = 4; break;
    case GgmlType::F16: case GgmlType::BF16: e = 1; b = 2; break;
    case GgmlType::Q4_0: e = 32; b = 18; break;   // fp16 d, 16 bytes of nibbles
    case GgmlType::Q4_1: e = 32; b = 20; break;   // fp16 d, fp16 m, 16 bytes of nibbles
    case GgmlType::Q5_0: e = 32; b = 22; break;   // fp16 d, 4 bytes of high bits, 16 of nibbles
    case GgmlType::Q5_1: e = 32; b = 24; break;   // fp16 d, fp16 m, 4 + 16
    case GgmlType::Q8_0: e = 32; b = 34; break;   // fp16 d, 32 int8
    case GgmlType::Q8_1: e = 32; b = 36; break;   // fp16 d, fp16 s, 32 int8
    case GgmlType::Q2_K: e = 256; b = 84; break;
    case GgmlType::Q3_K: e = 256; b = 110; break;
    case GgmlType::Q4_K: e = 256; b = 144; break;  // fp16 d, fp16 dmin, 12 scale bytes, 128 nibble bytes
    case GgmlType::Q5_K: e = 256; b = 176; break;  // as Q4_K plus 32 bytes of high bits
    case GgmlType::Q6_K: e = 256; b = 210; break;  // 128 low nibbles, 64 high 2-bits, 16 int8 scales, fp16 d
    case GgmlType::Q8_K: e = 256; b = 292; break;
    default: return false;
  }
  if (be) *be = e;
  if (bb) *bb = b;
  return true;
}

std::string ggml_type_name(uint32_t type) {
  switch (GgmlType(type)) {
    case GgmlType::F32: return "F32";
    case GgmlType::F16: return "F16";
    case GgmlType::BF16: return "BF16";
    case GgmlType::Q4_0: return "Q4_0";
    case GgmlType::Q4_1: return "Q4_1";
    case GgmlType::Q5_0: return "Q5_0";
    case GgmlType::Q5_1: return "Q5_1";
    case GgmlType::Q8_0: return "Q8_0";
    case GgmlType::Q8_1: return "Q8_1";
    case GgmlType::Q2_K: return "Q2_K";
    case GgmlType::Q3_K: return "Q3_K";
    case GgmlType::Q4_K: return "Q4_K";
    case GgmlType::Q5_K: return "Q5_K";
    case GgmlType::Q6_K: return "Q6_K";
    case GgmlType::Q8_K: return "Q8_K";
  }
  return "type " + std::to_string(type);
}

bool ggml_type_dequantizable(uint32_t type) {
  switch (GgmlType(type)) {
    case GgmlType::F32: case GgmlType::F16: case GgmlType::BF16: case GgmlType::Q4_0: case GgmlType::Q4_1:
    case GgmlType::Q5_0: case GgmlType::Q5_1: case GgmlType::Q8_0: case GgmlType::Q4_K: case GgmlType::Q5_K:
    case GgmlType::Q6_K:
      return true;
    default:
      return false;
  }
}

namespace {
// K-quant 6-bit scale and min number j (0..7) of a Q4_K/Q5_K super-block: the first four are the
// low 6 bits of bytes 0-3 (scales) and 4-7 (mins); the last four take their low 4 bits from bytes
// 8-11 and their top 2 bits from the spare top bits of bytes 0-7.
void k_scale_min(int j, const uint8_t* q, int* sc, int* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}
}  // namespace

void dequantize_row(GgmlType type, const uint8_t* src, float* y, int64_t n) {
  int64_t be = 0, bb = 0;
  if (!ggml_type_layout(uint32_t(type), &be, &bb) || !ggml_type_dequantizable(uint32_t(type)))
    throw std::invalid_argument("dequantize_row: cannot convert " + ggml_type_name(uint32_t(type)));
  if (n % be != 0) throw std::invalid_argument("dequantize_row: n is not a multiple of the block size");
  const int64_t nb = n / be;
  switch (type) {
    case GgmlType::F32: std::memcpy(y, src, size_t(n) * 4); return;
    case GgmlType::F16: for (int64_t i = 0; i < n; ++i) y[i] = h2f(src + 2 * i); return;
    case GgmlType::BF16: for (int64_t i = 0; i < n; ++i) y[i] = bf16_to_float(rd16(src + 2 * i)); return;
    case GgmlType::Q8_0:  // x = d * q
      for (int64_t b = 0; b < nb; ++b, src += 34, y += 32) {
        const float d = h2f(src);
        for (int j = 0; j < 32; ++j) y[j] = d * float(int8_t(src[2 + j]));
      }
      return;
    case GgmlType::Q4_0:  // x = d * (nibble - 8); low nibbles are elements 0-15, high nibbles 16-31
      for (int64_t b = 0; b < nb; ++b, src += 18, y += 32) {
        const float d = h2f(src);
        for (int j = 0; j < 16; ++j) {
          y[j] = d * float(int(src[2 + j] & 0xF) - 8);
          y[j + 16] = d * float(int(src[2 + j] >> 4) - 8);
        }
      }
      return;
    case GgmlType::Q4_1:  // x = d * nibble + m
      for (int64_t b = 0; b < nb; ++b, src += 20, y += 32) {
        const float d = h2f(src), m = h2f(src + 2);
        for (int j = 0; j < 16; ++j) {
          y[j] = d * float(src[4 + j] & 0xF) + m;
          y[j + 16] = d * float(src[4 + j] >> 4) + m;
        }
      }
      return;
    case GgmlType::Q5_0:  // 5-bit q = nibble | bit j of qh << 4; x = d * (q - 16)
    case GgmlType::Q5_1: {  // x = d * q + m
      const bool has_m = type == GgmlType::Q5_1;
      const int hdr = has_m ? 4 : 2;
      for (int64_t b = 0; b < nb; ++b, src += bb, y += 32) {
        const float d = h2f(src), m = has_m ? h2f(src + 2) : 0.0f;
        uint32_t qh;
        std::memcpy(&qh, src + hdr, 4);
        const uint8_t* qs = src + hdr + 4;
        const int off = has_m ? 0 : 16;
        for (int j = 0; j < 16; ++j) {
          const int q0 = (qs[j] & 0xF) | int(((qh >> j) & 1u) << 4);
          const int q1 = (qs[j] >> 4) | int(((qh >> (j + 16)) & 1u) << 4);
          y[j] = d * float(q0 - off) + m;
          y[j + 16] = d * float(q1 - off) + m;
        }
      }
      return;
    }
    case GgmlType::Q4_K:
    case GgmlType::Q5_K: {
      // 8 sub-blocks of 32: x = d * scale_j * q - dmin * min_j. Each 32 bytes of nibbles hold two
      // sub-blocks (low nibbles first); Q5_K's fifth bit of sub-block j is bit j of each qh byte.
      const bool five = type == GgmlType::Q5_K;
      for (int64_t b = 0; b < nb; ++b, src += bb) {
        const float d = h2f(src), dmin = h2f(src + 2);
        const uint8_t* scales = src + 4;
        const uint8_t* qh = src + 16;
        const uint8_t* q = src + (five ? 48 : 16);
        for (int j = 0; j < 8; j += 2, q += 32) {
          int s0, m0, s1, m1;
          k_scale_min(j, scales, &s0, &m0);
          k_scale_min(j + 1, scales, &s1, &m1);
          for (int l = 0; l < 32; ++l) {
            const int h0 = five ? ((qh[l] >> j) & 1) << 4 : 0;
            const int h1 = five ? ((qh[l] >> (j + 1)) & 1) << 4 : 0;
            y[l] = d * float(s0) * float((q[l] & 0xF) + h0) - dmin * float(m0);
            y[l + 32] = d * float(s1) * float((q[l] >> 4) + h1) - dmin * float(m1);
          }
          y += 64;
        }
      }
      return;
    }
    case GgmlType::Q6_K:
      // Two halves of 128; in each, element l + 32k takes its low 4 bits from ql (k = 0,1: low
      // nibbles of ql[l], ql[l+32]; k = 2,3: high nibbles) and its top 2 bits from qh[l] bits 2k..2k+1;
      // x = d * scale[16-element group] * (q - 32).
      for (int64_t b = 0; b < nb; ++b, src += 210) {
        const uint8_t* ql = src;
        const uint8_t* qh = src + 128;
        const int8_t* sc = reinterpret_cast<const int8_t*>(src + 192);
        const float d = h2f(src + 208);
        for (int half = 0; half < 2; ++half, ql += 64, qh += 32, sc += 8, y += 128) {
          for (int l = 0; l < 32; ++l) {
            const int is = l / 16;
            const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
            const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
            const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
            const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
            y[l] = d * float(sc[is]) * float(q1);
            y[l + 32] = d * float(sc[is + 2]) * float(q2);
            y[l + 64] = d * float(sc[is + 4]) * float(q3);
            y[l + 96] = d * float(sc[is + 6]) * float(q4);
          }
        }
      }
      return;
    default:
      break;
  }
  throw std::invalid_argument("dequantize_row: cannot convert " + ggml_type_name(uint32_t(type)));
}

std::string gguf_value_type_name(GgufValueType t) {
  static const char* names[] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64"};
  return uint32_t(t) <= 12 ? names[uint32_t(t)] : "type " + std::to_string(uint32_t(t));
}

bool GgufValue::is_integer() const {
  switch (type) {
    case GgufValueType::U8: case GgufValueType::I8: case GgufValueType::U16: case GgufValueType::I16:
    case GgufValueType::U32: case GgufValueType::I32: case GgufValueType::U64: case GgufValueType::I64:
      return true;
    default:
      return false;
  }
}

int64_t GgufTensor::elements() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

// ---- the file ------------------------------------------------------------------------------------

void GgufFile::fail(const std::string& field, const std::string& message) const {
  throw_input_error(path_, 0, field, message);
}

GgufFile::GgufFile(const std::string& path) : path_(path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail("file", std::string("cannot open: ") + std::strerror(errno));
  struct stat st{};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    fail("file", "not a regular file");
  }
  size_ = size_t(st.st_size);
  if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const int e = errno;
      ::close(fd);
      fail("file", std::string("cannot map: ") + std::strerror(e));
    }
    base_ = static_cast<const uint8_t*>(p);
    mapped_ = true;
  }
  ::close(fd);  // the mapping keeps the file alive
  try {
    parse();
  } catch (...) {
    if (mapped_) ::munmap(const_cast<uint8_t*>(base_), size_);
    mapped_ = false;
    throw;
  }
}

GgufFile::GgufFile(const std::string& name, const void* data, size_t size)
    : path_(name), base_(static_cast<const uint8_t*>(data)), size_(size) {
  parse();
}

GgufFile::~GgufFile() {
  if (mapped_) ::munmap(const_cast<uint8_t*>(base_), size_);
}

void GgufFile::parse() {
  Cursor c{*this, base_, size_};
  c.need(4, "magic");
  if (std::memcmp(base_, "GGUF", 4) != 0) {
    std::string got;
    for (int i = 0; i < 4; ++i) {
      const char ch = char(base_[i]);
      got += (ch >= 32 && ch < 127) ? std::string(1, ch) : "\\x" + std::to_string(int(base_[i]));
    }
    fail("magic", "'" + got + "' is not 'GGUF' (not a GGUF file)");
  }
  c.pos = 4;
  version_ = c.read<uint32_t>("version");
  // v1 used 32-bit counts and lengths; nothing current writes it.
  if (version_ != 2 && version_ != 3) fail("version", std::to_string(version_) + " is not supported (allowed: 2, 3)");
  const uint64_t n_tensors = c.read<uint64_t>("tensor count");
  const uint64_t n_kv = c.read<uint64_t>("metadata count");
  if (const uint64_t limit = input_limit(InputLimit::tensors); n_tensors > limit)
    fail("tensor count", limit_exceeded(InputLimit::tensors, "tensor count", n_tensors, limit));
  if (const uint64_t limit = input_limit(InputLimit::metadata_keys); n_kv > limit)
    fail("metadata count", limit_exceeded(InputLimit::metadata_keys, "metadata count", n_kv, limit));
  // A key/value pair takes at least 8 (key length) + 4 (type) + 1 bytes; a tensor info at least 8 + 4 + 8 + 4 + 8.
  if (n_kv > c.remaining() / 13) fail("metadata count", std::to_string(n_kv) + " pairs cannot fit in the " + std::to_string(c.remaining()) + " bytes left");
  if (n_tensors > c.remaining() / 32) fail("tensor count", std::to_string(n_tensors) + " tensors cannot fit in the " + std::to_string(c.remaining()) + " bytes left");

  for (uint64_t k = 0; k < n_kv; ++k) {
    const std::string key = c.str("metadata key #" + std::to_string(k));
    const std::string field = "metadata '" + key + "'";
    if (kv_.count(key)) fail(field, "appears twice");
    const uint32_t t = c.read<uint32_t>(field + " (type)");
    if (t > uint32_t(GgufValueType::F64)) fail(field, "value type " + std::to_string(t) + " is unknown (allowed: 0-12)");
    GgufValue v;
    read_value(c, GgufValueType(t), v, field, 0);
    kv_.emplace(key, std::move(v));
  }

  if (const GgufValue* a = find("general.alignment")) {
    if (!a->is_integer() || a->i <= 0 || a->i > (1 << 20) || (a->i & (a->i - 1)) != 0)
      fail("metadata 'general.alignment'", (a->is_integer() ? std::to_string(a->i) : gguf_value_type_name(a->type)) +
                                               " is not allowed (a power of two from 1 to 1048576)");
    alignment_ = uint64_t(a->i);
  }

  tensors_.reserve(size_t(n_tensors));
  for (uint64_t k = 0; k < n_tensors; ++k) {
    GgufTensor t;
    t.name = c.str("tensor #" + std::to_string(k) + " name");
    const std::string field = "tensor '" + t.name + "'";
    if (tensor_index_.count(t.name)) fail(field, "appears twice");
    const uint32_t nd = c.read<uint32_t>(field + " (n_dims)");
    if (nd < 1 || nd > kMaxDims) fail(field, "n_dims " + std::to_string(nd) + " is not allowed (1 to 4)");
    int64_t elems = 1;
    for (uint32_t d = 0; d < nd; ++d) {
      const uint64_t v = c.read<uint64_t>(field + " (dims)");
      if (v < 1 || v > uint64_t(INT64_MAX)) fail(field, "dimension " + std::to_string(d) + " = " + std::to_string(v) + " is not allowed (at least 1)");
      if (uint64_t(elems) > uint64_t(INT64_MAX) / v) fail(field, "element count overflows (dimension " + std::to_string(d) + " = " + std::to_string(v) + ")");
      elems *= int64_t(v);
      t.dims.push_back(int64_t(v));
    }
    if (const uint64_t limit = input_limit(InputLimit::tensor_elements); uint64_t(elems) > limit)
      fail(field, limit_exceeded(InputLimit::tensor_elements, "element count", uint64_t(elems), limit));
    t.type = c.read<uint32_t>(field + " (type)");
    int64_t be = 0, bb = 0;
    if (!ggml_type_layout(t.type, &be, &bb))
      fail(field, "type " + std::to_string(t.type) + " is unknown (allowed: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1, Q2_K-Q8_K)");
    if (t.dims[0] % be != 0)
      fail(field, "first dimension " + std::to_string(t.dims[0]) + " is not a multiple of the " + ggml_type_name(t.type) +
                      " block size " + std::to_string(be));
    const uint64_t blocks = uint64_t(elems / be);
    if (blocks > uint64_t(INT64_MAX) / uint64_t(bb)) fail(field, "byte size overflows");
    t.bytes = blocks * uint64_t(bb);
    t.offset = c.read<uint64_t>(field + " (offset)");
    if (t.offset % alignment_ != 0)
      fail(field, "offset " + std::to_string(t.offset) + " is not a multiple of the alignment " + std::to_string(alignment_));
    tensor_index_.emplace(t.name, tensors_.size());
    tensors_.push_back(std::move(t));
  }

  // The data section starts at the next multiple of the alignment.
  const uint64_t data_start = (uint64_t(c.pos) + alignment_ - 1) / alignment_ * alignment_;
  if (data_start > size_ && n_tensors > 0)
    fail("data section", "starts at offset " + std::to_string(data_start) + ", past the end of the file (" + std::to_string(size_) + " bytes)");
  const uint64_t data_size = data_start <= size_ ? size_ - data_start : 0;
  for (GgufTensor& t : tensors_) {
    if (t.offset > data_size || t.bytes > data_size - t.offset)
      fail("tensor '" + t.name + "'", "data [" + std::to_string(t.offset) + ", " + std::to_string(t.offset + t.bytes) +
                                           ") runs past the end of the data section (" + std::to_string(data_size) + " bytes)");
    t.data = base_ + data_start + t.offset;
  }
  std::vector<const GgufTensor*> order;
  for (const GgufTensor& t : tensors_) order.push_back(&t);
  std::sort(order.begin(), order.end(), [](auto* a, auto* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < order.size(); ++i)
    if (order[i - 1]->offset + order[i - 1]->bytes > order[i]->offset)
      fail("tensor '" + order[i]->name + "'", "data at offset " + std::to_string(order[i]->offset) + " overlaps tensor '" +
                                                   order[i - 1]->name + "' (ends at " + std::to_string(order[i - 1]->offset + order[i - 1]->bytes) + ")");
}

const GgufValue* GgufFile::find(const std::string& key) const {
  auto it = kv_.find(key);
  return it == kv_.end() ? nullptr : &it->second;
}

namespace {
std::string describe(const GgufValue& v) {
  if (v.is_integer()) return std::to_string(v.type == GgufValueType::U64 ? int64_t(v.u) : v.i);
  if (v.is_float()) return std::to_string(v.f);
  if (v.type == GgufValueType::STRING) return "'" + v.s + "'";
  return "a " + gguf_value_type_name(v.type);
}
}  // namespace

int64_t GgufFile::get_int(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) fail("metadata '" + key + "'", "missing (an integer is required)");
  if (!v->is_integer()) fail("metadata '" + key + "'", describe(*v) + " is not an integer");
  if (v->type == GgufValueType::U64 && v->u > uint64_t(INT64_MAX)) fail("metadata '" + key + "'", std::to_string(v->u) + " is out of range");
  return v->i;
}
int64_t GgufFile::get_int(const std::string& key, int64_t dflt) const { return has(key) ? get_int(key) : dflt; }

double GgufFile::get_float(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) fail("metadata '" + key + "'", "missing (a number is required)");
  if (v->is_float()) return v->f;
  if (v->is_integer()) return double(v->i);
  fail("metadata '" + key + "'", describe(*v) + " is not a number");
}
double GgufFile::get_float(const std::string& key, double dflt) const { return has(key) ? get_float(key) : dflt; }

std::string GgufFile::get_string(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) fail("metadata '" + key + "'", "missing (a string is required)");
  if (v->type != GgufValueType::STRING) fail("metadata '" + key + "'", describe(*v) + " is not a string");
  return v->s;
}
std::string GgufFile::get_string(const std::string& key, const std::string& dflt) const {
  return has(key) ? get_string(key) : dflt;
}

const std::vector<std::string>& GgufFile::get_string_array(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) fail("metadata '" + key + "'", "missing (an array of strings is required)");
  if (v->type != GgufValueType::ARRAY || v->elem != GgufValueType::STRING)
    fail("metadata '" + key + "'", describe(*v) + " is not an array of strings");
  return v->strs;
}

const std::vector<double>& GgufFile::get_number_array(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) fail("metadata '" + key + "'", "missing (an array of numbers is required)");
  if (v->type != GgufValueType::ARRAY || v->elem == GgufValueType::STRING || v->elem == GgufValueType::ARRAY)
    fail("metadata '" + key + "'", describe(*v) + " is not an array of numbers");
  return v->nums;
}

const GgufTensor* GgufFile::find_tensor(const std::string& name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

const GgufTensor& GgufFile::tensor(const std::string& name) const {
  const GgufTensor* t = find_tensor(name);
  if (!t) fail("tensor '" + name + "'", "missing");
  return *t;
}

std::vector<float> GgufFile::dequantize(const GgufTensor& t) const {
  if (!ggml_type_dequantizable(t.type))
    fail("tensor '" + t.name + "'", "type " + ggml_type_name(t.type) +
                                        " cannot be converted (allowed: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K)");
  std::vector<float> out(size_t(t.elements()));
  dequantize_row(GgmlType(t.type), t.data, out.data(), t.elements());
  return out;
}

}  // namespace kvsim::llm
