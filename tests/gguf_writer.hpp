// Builds GGUF images byte by byte, for tests that read them back (tests/test_gguf.cpp) and for the
// fuzzer's seed corpus (fuzz/seeds.cpp): a file whose every byte the test controls can be damaged in
// exactly one place.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace kvsim::test_support {

// Serializes a GGUF v3 file: metadata, then tensor infos, then the aligned data section.
struct GgufWriter {
  std::string head, data;
  uint64_t n_kv = 0;
  uint64_t alignment = 32;
  struct Info { std::string name; std::vector<uint64_t> dims; uint32_t type; uint64_t offset; };
  std::vector<Info> infos;

  template <class T>
  static void put(std::string& s, T v) { s.append(reinterpret_cast<const char*>(&v), sizeof(T)); }
  static void put_str(std::string& s, const std::string& v) { put<uint64_t>(s, v.size()); s += v; }

  void kv_u32(const std::string& k, uint32_t v) { put_str(head, k); put<uint32_t>(head, 4); put(head, v); ++n_kv; }
  void kv_f32(const std::string& k, float v) { put_str(head, k); put<uint32_t>(head, 6); put(head, v); ++n_kv; }
  void kv_str(const std::string& k, const std::string& v) { put_str(head, k); put<uint32_t>(head, 8); put_str(head, v); ++n_kv; }
  void kv_strs(const std::string& k, const std::vector<std::string>& v) {
    put_str(head, k); put<uint32_t>(head, 9); put<uint32_t>(head, 8); put<uint64_t>(head, v.size());
    for (auto& s : v) put_str(head, s);
    ++n_kv;
  }
  void kv_i32s(const std::string& k, const std::vector<int32_t>& v) {
    put_str(head, k); put<uint32_t>(head, 9); put<uint32_t>(head, 5); put<uint64_t>(head, v.size());
    for (int32_t x : v) put(head, x);
    ++n_kv;
  }
  void tensor(const std::string& name, std::vector<uint64_t> dims, uint32_t type, const std::string& bytes) {
    while (data.size() % alignment) data.push_back('\0');
    infos.push_back({name, dims, type, data.size()});
    data += bytes;
  }
  std::string bytes() const {
    std::string s = "GGUF";
    put<uint32_t>(s, 3);
    put<uint64_t>(s, infos.size());
    put<uint64_t>(s, n_kv);
    s += head;
    for (auto& t : infos) {
      put_str(s, t.name);
      put<uint32_t>(s, uint32_t(t.dims.size()));
      for (uint64_t d : t.dims) put(s, d);
      put(s, t.type);
      put(s, t.offset);
    }
    while (s.size() % alignment) s.push_back('\0');
    return s + data;
  }
};

}  // namespace kvsim::test_support
