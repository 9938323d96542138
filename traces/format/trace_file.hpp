// A trace stored on disk (docs/trace-format.md): one safetensors file, or a directory of shards that
// split the layers between them. open() validates everything it can without reading the big tensors:
// the container, the kvsim_trace metadata, every tensor's dtype and shape against the metadata, and the
// token-level arrays (validate_trace). keys, values and queries stay in the mapping and are converted to
// float row by row as they are read, so opening a 60 GB trace costs a few pages of memory.
//
// Non-finite numbers in keys/values/queries would silently poison every score computed from them, but
// scanning 60 GB at open would defeat the lazy reading. So a layer is scanned the first time any of its
// rows is read (check_finite_layer), and `check_finite_all()` scans everything for `trace info`.
//
// The mapping assumes the file does not change while open: replacing it (as write_trace does, by
// rename) is safe, but truncating it in place makes later reads fault (SIGBUS), as with any mmap.
#pragma once
#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "traces/format/safetensors.hpp"
#include "traces/format/trace.hpp"

namespace kvsim {

class TraceFile final : public TraceSource {
 public:
  // `path` is a trace file or a directory of `*.safetensors` shards. Throws InputError naming the file,
  // the tensor or metadata field, the offending value and what is allowed.
  static std::unique_ptr<TraceFile> open(const std::string& path);
  ~TraceFile() override;

  const TraceMeta& meta() const override { return meta_; }
  const TraceTokens& tokens() const override { return tokens_; }
  bool has_values() const override { return has_values_; }
  DType storage_dtype() const override { return dtype_; }
  // Throw std::out_of_range for slots or rows outside the trace, InputError when the layer holds a
  // non-finite number (checked once per layer slot, on first read).
  void keys(int layer_slot, int kv_slot, int64_t t0, int64_t t1, float* out) const override;
  void values(int layer_slot, int kv_slot, int64_t t0, int64_t t1, float* out) const override;
  void queries(int layer_slot, int q_slot, int64_t s0, int64_t s1, float* out) const override;

  // Scans one layer slot's keys, values and queries for NaN/Inf; throws InputError naming the tensor,
  // the layer, head and token (or step) indices and the value. Remembers success.
  void check_finite_layer(int layer_slot) const;
  void check_finite_all() const;

  // For `trace info`.
  struct Shard {
    std::string path;
    uint64_t file_size = 0;
    std::vector<int> layers;          // model layers this file stores
    std::vector<TensorView> tensors;  // in data order
  };
  const std::string& path() const { return path_; }
  bool is_directory() const { return is_directory_; }
  const std::vector<Shard>& shards() const { return shards_; }
  uint64_t file_bytes() const;  // all shards together
  // The named tensor of a single file; for a directory, of the first shard that holds it. nullptr when absent.
  const TensorView* tensor(const std::string& name) const;
  // Bytes per tensor name, summed over shards, in the first shard's data order.
  std::vector<std::pair<std::string, uint64_t>> tensor_bytes() const;

 private:
  TraceFile() = default;
  struct Part;  // one mapped shard and its big-tensor views
  std::string path_;
  bool is_directory_ = false;
  TraceMeta meta_;
  TraceTokens tokens_;
  bool has_values_ = false;
  DType dtype_ = DType::fp32;
  std::vector<Shard> shards_;
  std::vector<std::unique_ptr<Part>> parts_;
  std::vector<std::pair<int, int>> slot_;  // layer slot -> (part, layer slot within that part)
  // Per layer slot: scanned and finite. The flag is the fast path; the mutex makes one thread scan.
  std::unique_ptr<std::atomic<bool>[]> checked_;
  std::unique_ptr<std::mutex[]> check_mutex_;

  static std::unique_ptr<Part> open_part(const std::string& path);
  void scan_layer(int layer_slot) const;
  void read_kv(const char* which, int layer_slot, int kv_slot, int64_t t0, int64_t t1, float* out) const;
};

// Streams any trace into one file at `path`, layer by layer and head by head in blocks of a few MB,
// converting to `dtype` (fp32, fp16 or bf16; fp8 is an InputError). Atomic: a failure leaves no file.
// Refuses values that are or become non-finite in `dtype` (e.g. > 65504 in fp16), naming where.
// `progress` (optional) receives the fraction of bytes written, ending at 1.
void write_trace(const std::string& path, const TraceSource& src, DType dtype,
                 const std::function<void(double fraction)>& progress = {});

}  // namespace kvsim
