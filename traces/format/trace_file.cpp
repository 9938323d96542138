#include "traces/format/trace_file.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <type_traits>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "traces/format/half.hpp"
#include "traces/format/trace_meta_json.hpp"

namespace kvsim {

// safetensors stores little-endian numbers; we read them in place.
static_assert(std::endian::native == std::endian::little, "trace files are read in place: little-endian hosts only");

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::vector<std::string> kKnownTensors = {"keys",      "values",    "queries", "query_positions",
                                                "token_ids", "surprisal", "entropy", "varentropy"};
// A directory with more files than any model has layers is not a shard directory.
constexpr size_t kMaxShards = 4096;
// Rows are converted and written in blocks of about this many bytes of float.
constexpr size_t kBlockBytes = size_t(4) << 20;

bool is_float_dtype(StDType t) { return t == StDType::F32 || t == StDType::F16 || t == StDType::BF16; }

DType to_dtype(StDType t) { return t == StDType::F16 ? DType::fp16 : t == StDType::BF16 ? DType::bf16 : DType::fp32; }
StDType to_st_dtype(DType t) { return t == DType::fp16 ? StDType::F16 : t == DType::bf16 ? StDType::BF16 : StDType::F32; }

std::string dtype_name(StDType t) { return std::string(st_dtype_name(t)); }

void to_float(StDType t, const std::byte* src, size_t n, float* out) {
  if (t == StDType::F32) {
    std::memcpy(out, src, n * 4);
    return;
  }
  for (size_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, src + 2 * i, 2);
    out[i] = t == StDType::F16 ? fp16_to_float(h) : bf16_to_float(h);
  }
}

// Index of the first NaN or infinity among n elements, or -1. Looks at exponent bits only: fast
// enough to scan a layer of a long trace in milliseconds.
int64_t first_nonfinite(StDType t, const std::byte* p, size_t n) {
  if (t == StDType::F32) {
    for (size_t i = 0; i < n; ++i) {
      uint32_t u;
      std::memcpy(&u, p + 4 * i, 4);
      if ((u & 0x7f800000u) == 0x7f800000u) return int64_t(i);
    }
    return -1;
  }
  const uint16_t mask = t == StDType::F16 ? 0x7c00u : 0x7f80u;
  for (size_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, p + 2 * i, 2);
    if ((h & mask) == mask) return int64_t(i);
  }
  return -1;
}

std::string value_string(float v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  std::ostringstream o;
  o << v;
  return o.str();
}

template <typename T>
std::string element_string(T v) {
  if constexpr (std::is_integral_v<T>) return std::to_string(v);  // exact, even beyond float's 2^24
  else return value_string(float(v));
}

// The first field where two kvsim_trace objects differ, with both values, or nothing.
struct Difference {
  std::string field, here, there;
};
std::optional<Difference> first_difference(const json& a, const json& b, const std::string& field) {
  if (a.is_object() && b.is_object()) {
    std::vector<std::string> keys;
    for (const auto& [k, v] : a.items()) keys.push_back(k), (void)v;
    for (const auto& [k, v] : b.items())
      if (!a.contains(k)) keys.push_back(k), (void)v;
    for (const auto& k : keys) {
      if (!a.contains(k) || !b.contains(k))
        return Difference{field + "." + k, a.contains(k) ? a[k].dump() : "absent", b.contains(k) ? b[k].dump() : "absent"};
      if (auto d = first_difference(a[k], b[k], field + "." + k)) return d;
    }
    return std::nullopt;
  }
  if (a == b) return std::nullopt;
  return Difference{field, a.dump(), b.dump()};
}

}  // namespace

struct TraceFile::Part {
  std::string path;
  MappedFile file;
  SafetensorsHeader header;
  TraceMeta meta;
  TraceTokens tokens;
  StDType dtype = StDType::F32;
  bool has_values = false;
  TensorView keys, values, queries;
};

namespace {

const SafetensorsEntry* one_dimensional(const SafetensorsHeader& h, const std::string& name, const std::string& path,
                                        bool required, bool integer, const std::string& length_name) {
  const SafetensorsEntry* e = h.find(name);
  if (!e) {
    if (required) throw_input_error(path, 0, name, "tensor is missing; every trace file has it");
    return nullptr;
  }
  if (e->shape.size() != 1)
    throw_input_error(path, 0, name, "tensor has shape " + shape_string(e->shape) + "; it must be one-dimensional [" +
                                         length_name + "]");
  const bool ok = integer ? (e->dtype == StDType::I32 || e->dtype == StDType::I64) : is_float_dtype(e->dtype);
  if (!ok)
    throw_input_error(path, 0, name, "tensor has dtype " + dtype_name(e->dtype) + "; allowed: " +
                                         (integer ? "I32, I64" : "F32, F16, BF16"));
  return e;
}

std::vector<int64_t> read_ints(const TensorView& v) {
  std::vector<int64_t> out(v.numel());
  for (size_t i = 0; i < out.size(); ++i) {
    if (v.dtype == StDType::I32) {
      int32_t x;
      std::memcpy(&x, v.data + 4 * i, 4);
      out[i] = x;
    } else {
      std::memcpy(&out[i], v.data + 8 * i, 8);
    }
  }
  return out;
}

std::vector<float> read_floats(const TensorView& v) {
  std::vector<float> out(v.numel());
  to_float(v.dtype, v.data, out.size(), out.data());
  return out;
}

// Checks a 4-D tensor's shape against what the metadata implies, naming the first wrong dimension.
void check_shape(const std::string& path, const TensorView& v, const std::vector<int64_t>& want,
                 const std::vector<std::string>& dim_names) {
  std::string names;
  for (const auto& n : dim_names) names += (names.empty() ? "" : ", ") + n;
  if (v.shape.size() != want.size())
    throw_input_error(path, 0, v.name, "tensor has shape " + shape_string(v.shape) + " (rank " +
                                           std::to_string(v.shape.size()) + "); it must be " + shape_string(want) +
                                           " = [" + names + "]");
  for (size_t i = 0; i < want.size(); ++i)
    if (v.shape[i] != want[i])
      throw_input_error(path, 0, v.name, "tensor has shape " + shape_string(v.shape) + ": dimension " +
                                             std::to_string(i) + " (" + dim_names[i] + ") is " +
                                             std::to_string(v.shape[i]) + " but must be " + std::to_string(want[i]) +
                                             "; expected " + shape_string(want) + " = [" + names + "]");
}

}  // namespace

// Opens and fully validates one trace file (a whole trace, or one shard).
std::unique_ptr<TraceFile::Part> TraceFile::open_part(const std::string& path) {
  auto p = std::make_unique<TraceFile::Part>();
  p->path = path;
  p->file = MappedFile(path);
  p->header = parse_safetensors(p->file, path);
  const SafetensorsHeader& h = p->header;

  const auto it = h.metadata.find("kvsim_trace");
  if (it == h.metadata.end()) {
    std::vector<std::string> present;
    for (const auto& [k, v] : h.metadata) present.push_back(k), (void)v;
    throw_input_error(path, 0, "__metadata__",
                      "has no 'kvsim_trace' key (keys present: " + join(present) + ")" +
                          suggestion("kvsim_trace", present) +
                          "; a kvsim trace describes itself there as a JSON string (docs/trace-format.md)");
  }
  p->meta = parse_trace_meta(it->second, path);

  for (const auto& t : h.tensors)
    if (std::find(kKnownTensors.begin(), kKnownTensors.end(), t.name) == kKnownTensors.end())
      throw_input_error(path, 0, t.name, "unknown tensor" + suggestion(t.name, kKnownTensors) +
                                             "; a trace file holds only " + join(kKnownTensors));

  // The small token-level tensors are copied; validate_trace checks them against the metadata.
  const auto view = [&](const SafetensorsEntry* e) { return tensor_view(p->file, h, *e); };
  const auto* ids = one_dimensional(h, "token_ids", path, true, true, "T");
  const auto* qp = one_dimensional(h, "query_positions", path, true, true, "S");
  const auto* sur = one_dimensional(h, "surprisal", path, false, false, "T");
  const auto* ent = one_dimensional(h, "entropy", path, false, false, "G = T - prompt_tokens");
  const auto* var = one_dimensional(h, "varentropy", path, false, false, "G = T - prompt_tokens");
  const std::vector<int64_t> id64 = read_ints(view(ids));
  p->tokens.token_ids.reserve(id64.size());
  for (size_t i = 0; i < id64.size(); ++i) {
    if (id64[i] < 0 || id64[i] > INT32_MAX)  // checked before narrowing, so no I64 value wraps
      throw_input_error(path, 0, "token_ids[" + std::to_string(i) + "]",
                        "value " + std::to_string(id64[i]) + " is outside 0 .. " + std::to_string(INT32_MAX));
    p->tokens.token_ids.push_back(int32_t(id64[i]));
  }
  p->tokens.query_positions = read_ints(view(qp));
  if (sur) p->tokens.surprisal = read_floats(view(sur));
  if (ent) p->tokens.entropy = read_floats(view(ent));
  if (var) p->tokens.varentropy = read_floats(view(var));
  validate_trace(p->meta, p->tokens, path);

  // The big tensors: only dtype and shape now; the data is read (and checked for NaN) on demand.
  const TraceMeta& m = p->meta;
  const int64_t Ls = int64_t(m.layers.size()), Hks = int64_t(m.kv_heads.size()), Hqs = int64_t(m.query_heads.size());
  const int64_t T = p->tokens.tokens(), S = p->tokens.steps(), d = m.model.head_dim;
  const auto* k = h.find("keys");
  const auto* q = h.find("queries");
  const auto* v = h.find("values");
  if (!k) throw_input_error(path, 0, "keys", "tensor is missing; every trace file has it");
  if (!q) throw_input_error(path, 0, "queries", "tensor is missing; every trace file has it");
  if (!is_float_dtype(k->dtype))
    throw_input_error(path, 0, "keys", "tensor has dtype " + dtype_name(k->dtype) + "; allowed: F32, F16, BF16");
  p->dtype = k->dtype;
  for (const auto* e : {q, v})
    if (e && e->dtype != k->dtype)
      throw_input_error(path, 0, e->name, "tensor has dtype " + dtype_name(e->dtype) + " but keys have " +
                                              dtype_name(k->dtype) + "; keys, values and queries share one dtype");
  p->keys = view(k);
  p->queries = view(q);
  const std::vector<std::string> kv_dims = {"layers (kvsim_trace.layers has " + std::to_string(Ls) + ")",
                                            "KV heads (kvsim_trace.kv_heads has " + std::to_string(Hks) + ")",
                                            "tokens (token_ids has " + std::to_string(T) + ")",
                                            "head_dim (kvsim_trace.model.head_dim)"};
  check_shape(path, p->keys, {Ls, Hks, T, d}, kv_dims);
  if (v) {
    p->has_values = true;
    p->values = view(v);
    check_shape(path, p->values, {Ls, Hks, T, d}, kv_dims);
  }
  check_shape(path, p->queries, {Ls, Hqs, S, d},
              {"layers (kvsim_trace.layers has " + std::to_string(Ls) + ")",
               "query heads (kvsim_trace.query_heads has " + std::to_string(Hqs) + ")",
               "steps (query_positions has " + std::to_string(S) + ")", "head_dim (kvsim_trace.model.head_dim)"});
  return p;
}

TraceFile::~TraceFile() = default;

std::unique_ptr<TraceFile> TraceFile::open(const std::string& path) {
  std::unique_ptr<TraceFile> tf(new TraceFile());
  tf->path_ = path;
  std::error_code ec;
  tf->is_directory_ = fs::is_directory(path, ec);

  if (!tf->is_directory_) {
    tf->parts_.push_back(open_part(path));
  } else {
    std::vector<std::string> files;
    for (fs::directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec)) {
      const fs::path& f = it->path();
      std::error_code type_ec;  // a dangling link is skipped, not an error of the listing
      if (f.extension() == ".safetensors" && it->is_regular_file(type_ec)) files.push_back(f.string());
      if (files.size() > kMaxShards)
        throw_input_error(path, 0, "", "holds more than " + std::to_string(kMaxShards) +
                                           " .safetensors files; a shard directory has at most one per layer");
    }
    if (ec) throw_input_error(path, 0, "", "cannot list directory: " + ec.message());
    if (files.empty())
      throw_input_error(path, 0, "", "is a directory without *.safetensors files; a trace is a file or a directory of shards");
    std::sort(files.begin(), files.end());
    for (const auto& f : files) tf->parts_.push_back(open_part(f));
  }

  // Merge the shards: everything but the layers must agree, the layers must be disjoint.
  const Part& first = *tf->parts_.front();
  json first_meta = trace_meta_to_json(first.meta);
  first_meta.erase("layers");
  std::map<int, size_t> owner;  // model layer -> part
  for (size_t pi = 0; pi < tf->parts_.size(); ++pi) {
    const Part& p = *tf->parts_[pi];
    if (pi > 0) {
      json here = trace_meta_to_json(p.meta);
      here.erase("layers");
      if (auto d = first_difference(here, first_meta, "kvsim_trace"))
        throw_input_error(p.path, 0, d->field,
                          "is " + d->here + " here but " + d->there + " in " + first.path +
                              "; shards must agree on everything but layers");
      if (p.dtype != first.dtype)
        throw_input_error(p.path, 0, "keys", "dtype " + dtype_name(p.dtype) + " here but " + dtype_name(first.dtype) +
                                                 " in " + first.path + "; all shards store one dtype");
      if (p.has_values != first.has_values)
        throw_input_error(p.path, 0, "values",
                          std::string(p.has_values ? "present here but absent in " : "absent here but present in ") +
                              first.path + "; either every shard stores values or none does");
    }
    for (int l : p.meta.layers) {
      const auto [it, fresh] = owner.emplace(l, pi);
      if (!fresh)
        throw_input_error(p.path, 0, "kvsim_trace.layers",
                          "layer " + std::to_string(l) + " is stored both here and in " +
                              tf->parts_[it->second]->path + "; shards must hold disjoint layers");
    }
  }
  // Token-level arrays: identical wherever present; taken from the first shard that has each.
  const auto merge = [&](auto member, const char* name, bool required) {
    const Part* ref = nullptr;
    for (const auto& pp : tf->parts_) {
      const auto& v = (*pp).tokens.*member;
      if (v.empty()) continue;
      if (!ref) {
        ref = pp.get();
        continue;
      }
      const auto& r = ref->tokens.*member;
      if (v.size() != r.size())
        throw_input_error(pp->path, 0, name, "has " + std::to_string(v.size()) + " entries here but " +
                                                 std::to_string(r.size()) + " in " + ref->path +
                                                 "; token-level tensors must be identical in every shard");
      for (size_t i = 0; i < v.size(); ++i)
        if (!(v[i] == r[i]))
          throw_input_error(pp->path, 0, std::string(name) + "[" + std::to_string(i) + "]",
                            "is " + element_string(v[i]) + " here but " + element_string(r[i]) + " in " +
                                ref->path + "; token-level tensors must be identical in every shard");
    }
    if (!ref && required) throw_input_error(tf->path_, 0, name, "no shard stores this tensor");
    if (ref) tf->tokens_.*member = ref->tokens.*member;
  };
  merge(&TraceTokens::token_ids, "token_ids", true);
  merge(&TraceTokens::query_positions, "query_positions", true);
  merge(&TraceTokens::surprisal, "surprisal", false);
  merge(&TraceTokens::entropy, "entropy", false);
  merge(&TraceTokens::varentropy, "varentropy", false);

  tf->meta_ = first.meta;
  tf->meta_.layers.clear();
  for (const auto& [layer, pi] : owner) {
    tf->meta_.layers.push_back(layer);
    const auto& ls = tf->parts_[pi]->meta.layers;
    tf->slot_.emplace_back(int(pi), int(std::lower_bound(ls.begin(), ls.end(), layer) - ls.begin()));
  }
  tf->dtype_ = to_dtype(first.dtype);
  tf->has_values_ = first.has_values;
  validate_trace(tf->meta_, tf->tokens_, path);

  const size_t L = tf->slot_.size();
  tf->checked_ = std::make_unique<std::atomic<bool>[]>(L);
  for (size_t i = 0; i < L; ++i) tf->checked_[i].store(false);
  tf->check_mutex_ = std::make_unique<std::mutex[]>(L);
  for (const auto& pp : tf->parts_) {
    Shard s;
    s.path = pp->path;
    s.file_size = pp->file.size();
    s.layers = pp->meta.layers;
    for (const auto& e : pp->header.tensors) s.tensors.push_back(tensor_view(pp->file, pp->header, e));
    tf->shards_.push_back(std::move(s));
  }
  return tf;
}

// ---------------------------------------------------------------------------------------------------
// Reading rows

void TraceFile::check_finite_layer(int layer_slot) const {
  if (layer_slot < 0 || size_t(layer_slot) >= slot_.size())
    throw std::out_of_range("TraceFile: layer slot " + std::to_string(layer_slot) + " outside 0.." +
                            std::to_string(int(slot_.size()) - 1));
  if (checked_[size_t(layer_slot)].load(std::memory_order_acquire)) return;
  std::lock_guard<std::mutex> lock(check_mutex_[size_t(layer_slot)]);
  if (checked_[size_t(layer_slot)].load(std::memory_order_relaxed)) return;
  scan_layer(layer_slot);  // throws on a bad value, leaving the flag unset: every later read throws too
  checked_[size_t(layer_slot)].store(true, std::memory_order_release);
}

void TraceFile::check_finite_all() const {
  for (size_t l = 0; l < slot_.size(); ++l) check_finite_layer(int(l));
}

void TraceFile::scan_layer(int layer_slot) const {
  // Plain variables, not a structured binding: the lambda below captures them, which C++20 clang rejects.
  const int pi = slot_[size_t(layer_slot)].first, ls = slot_[size_t(layer_slot)].second;
  const Part& p = *parts_[size_t(pi)];
  const size_t d = size_t(meta_.model.head_dim), es = st_dtype_size(p.dtype);
  const std::string layer = "layer slot " + std::to_string(layer_slot) + " (model layer " +
                            std::to_string(meta_.layers[size_t(layer_slot)]) + ")";
  // One layer of a [Ls, heads, rows, d] tensor is heads * rows * d contiguous elements.
  const auto scan = [&](const TensorView& v, size_t heads, size_t rows, bool kv) {
    const size_t n = heads * rows * d;
    const int64_t bad = first_nonfinite(p.dtype, v.data + size_t(ls) * n * es, n);
    if (bad < 0) return;
    const size_t i = size_t(bad), h = i / (rows * d), r = (i / d) % rows, e = i % d;
    float x;
    to_float(p.dtype, v.data + (size_t(ls) * n + i) * es, 1, &x);
    const std::string where =
        kv ? "KV head slot " + std::to_string(h) + " (KV head " + std::to_string(meta_.kv_heads[h]) + "), token " +
                 std::to_string(r)
           : "query head slot " + std::to_string(h) + " (query head " + std::to_string(meta_.query_heads[h]) +
                 "), step " + std::to_string(r) + " (token " + std::to_string(tokens_.query_positions[r]) + ")";
    throw_input_error(p.path, 0, v.name, layer + ", " + where + ", element " + std::to_string(e) + ": value is " +
                                             value_string(x) + "; keys, values and queries must be finite");
  };
  const size_t T = size_t(tokens_.tokens()), S = size_t(tokens_.steps());
  scan(p.keys, meta_.kv_heads.size(), T, true);
  if (p.has_values) scan(p.values, meta_.kv_heads.size(), T, true);
  scan(p.queries, meta_.query_heads.size(), S, false);
}

void TraceFile::read_kv(const char* which, int layer_slot, int kv_slot, int64_t t0, int64_t t1, float* out) const {
  const int64_t T = tokens_.tokens();
  if (layer_slot < 0 || size_t(layer_slot) >= slot_.size() || kv_slot < 0 || size_t(kv_slot) >= meta_.kv_heads.size() ||
      t0 < 0 || t0 > t1 || t1 > T)
    throw std::out_of_range(std::string("TraceFile::") + which + ": layer slot " + std::to_string(layer_slot) +
                            ", KV slot " + std::to_string(kv_slot) + ", rows [" + std::to_string(t0) + ", " +
                            std::to_string(t1) + ") outside the trace");
  if (which[0] == 'v' && !has_values_) throw std::logic_error("TraceFile::values: " + path_ + " stores no values");
  check_finite_layer(layer_slot);
  const auto [pi, ls] = slot_[size_t(layer_slot)];
  const Part& p = *parts_[size_t(pi)];
  const TensorView& v = which[0] == 'k' ? p.keys : p.values;
  const size_t d = size_t(meta_.model.head_dim);
  const size_t row0 = (size_t(ls) * meta_.kv_heads.size() + size_t(kv_slot)) * size_t(T) + size_t(t0);
  to_float(p.dtype, v.data + row0 * d * st_dtype_size(p.dtype), size_t(t1 - t0) * d, out);
}

void TraceFile::keys(int l, int h, int64_t t0, int64_t t1, float* out) const { read_kv("keys", l, h, t0, t1, out); }
void TraceFile::values(int l, int h, int64_t t0, int64_t t1, float* out) const { read_kv("values", l, h, t0, t1, out); }

void TraceFile::queries(int layer_slot, int q_slot, int64_t s0, int64_t s1, float* out) const {
  const int64_t S = tokens_.steps();
  if (layer_slot < 0 || size_t(layer_slot) >= slot_.size() || q_slot < 0 ||
      size_t(q_slot) >= meta_.query_heads.size() || s0 < 0 || s0 > s1 || s1 > S)
    throw std::out_of_range("TraceFile::queries: layer slot " + std::to_string(layer_slot) + ", query slot " +
                            std::to_string(q_slot) + ", rows [" + std::to_string(s0) + ", " + std::to_string(s1) +
                            ") outside the trace");
  check_finite_layer(layer_slot);
  const auto [pi, ls] = slot_[size_t(layer_slot)];
  const Part& p = *parts_[size_t(pi)];
  const size_t d = size_t(meta_.model.head_dim);
  const size_t row0 = (size_t(ls) * meta_.query_heads.size() + size_t(q_slot)) * size_t(S) + size_t(s0);
  to_float(p.dtype, p.queries.data + row0 * d * st_dtype_size(p.dtype), size_t(s1 - s0) * d, out);
}

// ---------------------------------------------------------------------------------------------------
// Info

uint64_t TraceFile::file_bytes() const {
  uint64_t n = 0;
  for (const auto& s : shards_) n += s.file_size;
  return n;
}

const TensorView* TraceFile::tensor(const std::string& name) const {
  for (const auto& s : shards_)
    for (const auto& t : s.tensors)
      if (t.name == name) return &t;
  return nullptr;
}

std::vector<std::pair<std::string, uint64_t>> TraceFile::tensor_bytes() const {
  std::vector<std::pair<std::string, uint64_t>> out;
  for (const auto& s : shards_)
    for (const auto& t : s.tensors) {
      auto it = std::find_if(out.begin(), out.end(), [&](const auto& e) { return e.first == t.name; });
      if (it == out.end()) out.emplace_back(t.name, t.bytes);
      else it->second += t.bytes;
    }
  return out;
}

// ---------------------------------------------------------------------------------------------------
// Writing

void write_trace(const std::string& path, const TraceSource& src, DType dtype,
                 const std::function<void(double fraction)>& progress) {
  if (dtype == DType::fp8)
    throw_input_error(path, 0, "dtype", "fp8 is not a trace storage type; allowed: fp32, fp16, bf16");
  const TraceMeta& m = src.meta();
  const TraceTokens& tk = src.tokens();
  validate_trace(m, tk, path);
  const StDType st = to_st_dtype(dtype);
  const int64_t Ls = int64_t(m.layers.size()), Hks = int64_t(m.kv_heads.size()), Hqs = int64_t(m.query_heads.size());
  const int64_t T = tk.tokens(), S = tk.steps(), G = T - m.prompt_tokens, d = m.model.head_dim;

  SafetensorsWriter w(path);
  // Free-text fields (a command line, a file name) may hold bytes that are not UTF-8; they are
  // replaced (U+FFFD) rather than failing the write, since the JSON must be UTF-8.
  w.set_metadata("kvsim_trace", trace_meta_to_json(m).dump(-1, ' ', false, json::error_handler_t::replace));
  // Small tensors first: a reader that wants only the token-level data finds it in the first pages.
  w.add_tensor("token_ids", StDType::I32, {T});
  w.add_tensor("query_positions", StDType::I64, {S});
  if (!tk.surprisal.empty()) w.add_tensor("surprisal", StDType::F32, {T});
  if (!tk.entropy.empty()) w.add_tensor("entropy", StDType::F32, {G});
  if (!tk.varentropy.empty()) w.add_tensor("varentropy", StDType::F32, {G});
  w.add_tensor("keys", st, {Ls, Hks, T, d});
  if (src.has_values()) w.add_tensor("values", st, {Ls, Hks, T, d});
  w.add_tensor("queries", st, {Ls, Hqs, S, d});

  const double total = double(w.file_size());
  double written = 0;
  const auto raw = [&](const char* name, const void* data, size_t bytes) {
    w.write_tensor(name, [&](const SafetensorsWriter::Sink& sink) { sink(data, bytes); });
    written += double(bytes);
  };
  raw("token_ids", tk.token_ids.data(), tk.token_ids.size() * 4);
  raw("query_positions", tk.query_positions.data(), tk.query_positions.size() * 8);
  if (!tk.surprisal.empty()) raw("surprisal", tk.surprisal.data(), tk.surprisal.size() * 4);
  if (!tk.entropy.empty()) raw("entropy", tk.entropy.data(), tk.entropy.size() * 4);
  if (!tk.varentropy.empty()) raw("varentropy", tk.varentropy.data(), tk.varentropy.size() * 4);

  const size_t es = st_dtype_size(st);
  const int64_t block_rows = std::max<int64_t>(1, int64_t(kBlockBytes / (size_t(d) * 4)));
  std::vector<float> fbuf(size_t(block_rows * d));
  std::vector<std::byte> bbuf(fbuf.size() * es);
  // name: tensor; heads: its head count; rows: T or S; read: the source's reader for it.
  const auto big = [&](const char* name, int64_t heads, int64_t rows,
                       const std::function<void(int, int, int64_t, int64_t, float*)>& read) {
    w.write_tensor(name, [&](const SafetensorsWriter::Sink& sink) {
      for (int l = 0; l < Ls; ++l)
        for (int h = 0; h < heads; ++h)
          for (int64_t r0 = 0; r0 < rows; r0 += block_rows) {
            const int64_t r1 = std::min(rows, r0 + block_rows);
            const size_t n = size_t((r1 - r0) * d);
            read(l, h, r0, r1, fbuf.data());
            for (size_t i = 0; i < n; ++i) {
              const float x = fbuf[i];
              bool finite;
              if (st == StDType::F32) {
                std::memcpy(&bbuf[4 * i], &x, 4);
                finite = std::isfinite(x);
              } else {
                const uint16_t b = st == StDType::F16 ? float_to_fp16(x) : float_to_bf16(x);
                std::memcpy(&bbuf[2 * i], &b, 2);
                finite = (b & (st == StDType::F16 ? 0x7c00u : 0x7f80u)) != (st == StDType::F16 ? 0x7c00u : 0x7f80u);
              }
              if (!finite) {
                const bool kv = name[0] != 'q';
                const int64_t r = r0 + int64_t(i) / d;
                throw_input_error(
                    path, 0, name,
                    "layer slot " + std::to_string(l) + " (model layer " + std::to_string(m.layers[size_t(l)]) +
                        "), " + (kv ? "KV head slot " : "query head slot ") + std::to_string(h) + ", " +
                        (kv ? "token " : "step ") + std::to_string(r) + ", element " + std::to_string(int64_t(i) % d) +
                        ": value " + value_string(x) +
                        (std::isfinite(x) ? " overflows " + std::string(to_string(dtype)) + "; write fp32 or bf16"
                                          : " is not finite; traces hold finite numbers only"));
              }
            }
            sink(bbuf.data(), n * es);
            written += double(n * es);
            if (progress) progress(written / total);
          }
    });
  };
  big("keys", Hks, T, [&](int l, int h, int64_t a, int64_t b, float* o) { src.keys(l, h, a, b, o); });
  if (src.has_values())
    big("values", Hks, T, [&](int l, int h, int64_t a, int64_t b, float* o) { src.values(l, h, a, b, o); });
  big("queries", Hqs, S, [&](int l, int h, int64_t a, int64_t b, float* o) { src.queries(l, h, a, b, o); });
  w.commit();
  if (progress) progress(1.0);
}

}  // namespace kvsim
