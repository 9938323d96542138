#include "kernels/emu/device_memory.hpp"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>

namespace kvsim::emu {
namespace {
// cudaMalloc returns 256-byte aligned pointers; kernels may rely on it for vector loads.
constexpr size_t kAlign = 256;

struct Allocation {
  size_t bytes;
  MemoryKind kind;
  uint64_t serial;
  std::unique_ptr<uint64_t[]> written;  // device: one bit per byte (the access checker's shadow)
  uint64_t* writers = nullptr;          // device, lazily: one word per 4 bytes (freed with the allocation)
  uint32_t store_launch = 0;
  ~Allocation() { delete[] writers; }
};

// Keyed by start address, so the allocation holding an address is found with upper_bound.
struct Registry {
  std::mutex mu;
  std::map<uintptr_t, Allocation> live;
  uint64_t serial = 0;
};
Registry& registry() {
  static Registry r;
  return r;
}

// Sets bits [lo, hi) of a bitmap; atomically, as two host threads may mark one allocation.
void set_bits(uint64_t* words, size_t lo, size_t hi) {
  while (lo < hi) {
    const size_t w = lo / 64, b = lo % 64, n = std::min<size_t>(64 - b, hi - lo);
    const uint64_t m = n == 64 ? ~uint64_t(0) : ((uint64_t(1) << n) - 1) << b;
    if ((words[w] & m) != m) __atomic_fetch_or(&words[w], m, __ATOMIC_RELAXED);
    lo += n;
  }
}
}  // namespace

std::atomic<uint64_t> detail::allocation_generation{1};

void* allocate(size_t bytes, MemoryKind kind) {
  if (bytes == 0) return nullptr;
  if (bytes > SIZE_MAX - kAlign) return nullptr;
  const size_t rounded = (bytes + kAlign - 1) / kAlign * kAlign;
  void* p = std::aligned_alloc(kAlign, rounded);
  if (!p) return nullptr;
  std::unique_ptr<uint64_t[]> written;
  if (kind == MemoryKind::device) {
    written.reset(new (std::nothrow) uint64_t[(bytes + 63) / 64]());
    if (!written) {
      std::free(p);
      return nullptr;
    }
  }
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  auto& a = r.live[reinterpret_cast<uintptr_t>(p)];
  a.bytes = bytes;
  a.kind = kind;
  a.serial = ++r.serial;
  a.written = std::move(written);
  delete[] a.writers;
  a.writers = nullptr;
  a.store_launch = 0;
  detail::allocation_generation.fetch_add(1, std::memory_order_relaxed);
  return p;
}

bool release(void* p, MemoryKind kind) {
  if (!p) return true;
  Registry& r = registry();
  {
    std::lock_guard lock(r.mu);
    const auto it = r.live.find(reinterpret_cast<uintptr_t>(p));
    if (it == r.live.end() || it->second.kind != kind) return false;
    r.live.erase(it);
    detail::allocation_generation.fetch_add(1, std::memory_order_relaxed);
  }
  std::free(p);
  return true;
}

bool accessible_from_device(const void* p, size_t bytes) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  auto it = r.live.upper_bound(a);
  if (it == r.live.begin()) return false;
  --it;
  const uintptr_t start = it->first, end = start + it->second.bytes;
  return a >= start && a <= end && bytes <= end - a;
}

bool find_allocation(uintptr_t a, AllocationView& out, uintptr_t& gap_lo, uintptr_t& gap_hi) {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  auto next = r.live.upper_bound(a);
  gap_hi = next == r.live.end() ? UINTPTR_MAX : next->first;
  gap_lo = 0;
  if (next != r.live.begin()) {
    auto it = std::prev(next);
    const uintptr_t end = it->first + it->second.bytes;
    if (a < end) {
      Allocation& x = it->second;
      out.begin = it->first;
      out.end = end;
      out.kind = x.kind;
      out.written = x.written.get();
      out.writers = &x.writers;
      out.store_launch = &x.store_launch;
      out.serial = x.serial;
      return true;
    }
    gap_lo = end;
  }
  return false;
}


void mark_device_written(const void* p, size_t bytes) {
  AllocationView v;
  uintptr_t lo, hi;
  const auto a = reinterpret_cast<uintptr_t>(p);
  if (bytes == 0 || !find_allocation(a, v, lo, hi) || !v.written) return;
  set_bits(v.written, a - v.begin, std::min<uintptr_t>(a + bytes, v.end) - v.begin);
}

void mark_written_in(const AllocationView& v, uintptr_t a, size_t bytes) {
  if (v.written) set_bits(v.written, a - v.begin, a - v.begin + bytes);
}

bool all_written_in(const AllocationView& v, uintptr_t a, size_t bytes) {
  if (!v.written) return true;
  if (const size_t i = a - v.begin; i % 64 + bytes <= 64) {  // the usual case: one word of the bitmap
    const uint64_t m = bytes == 64 ? ~uint64_t(0) : ((uint64_t(1) << bytes) - 1) << (i % 64);
    return (__atomic_load_n(&v.written[i / 64], __ATOMIC_RELAXED) & m) == m;
  }
  for (size_t i = a - v.begin, hi = i + bytes; i < hi;) {
    const size_t w = i / 64, b = i % 64, n = std::min<size_t>(64 - b, hi - i);
    const uint64_t m = n == 64 ? ~uint64_t(0) : ((uint64_t(1) << n) - 1) << b;
    if ((__atomic_load_n(&v.written[w], __ATOMIC_RELAXED) & m) != m) return false;
    i += n;
  }
  return true;
}

bool fully_written(const AllocationView& v) {
  if (!v.written) return true;
  const size_t bytes = v.end - v.begin, words = bytes / 64;
  for (size_t w = 0; w < words; ++w)
    if (__atomic_load_n(&v.written[w], __ATOMIC_RELAXED) != ~uint64_t(0)) return false;
  return bytes % 64 == 0 || all_written_in(v, v.begin + words * 64, bytes % 64);
}

uint64_t* writer_words(const AllocationView& v) {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  if (!*v.writers) *v.writers = new uint64_t[(v.end - v.begin + 3) / 4]();
  return *v.writers;
}

}  // namespace kvsim::emu
