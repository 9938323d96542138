#include "kernels/emu/device_memory.hpp"

#include <cstdint>
#include <cstdlib>
#include <map>
#include <mutex>

namespace kvsim::emu {
namespace {
// cudaMalloc returns 256-byte aligned pointers; kernels may rely on it for vector loads.
constexpr size_t kAlign = 256;

struct Allocation {
  size_t bytes;
  MemoryKind kind;
};

// Keyed by start address, so the allocation holding an address is found with upper_bound.
struct Registry {
  std::mutex mu;
  std::map<uintptr_t, Allocation> live;
};
Registry& registry() {
  static Registry r;
  return r;
}
}  // namespace

void* allocate(size_t bytes, MemoryKind kind) {
  if (bytes == 0) return nullptr;
  if (bytes > SIZE_MAX - kAlign) return nullptr;
  const size_t rounded = (bytes + kAlign - 1) / kAlign * kAlign;
  void* p = std::aligned_alloc(kAlign, rounded);
  if (!p) return nullptr;
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  r.live[reinterpret_cast<uintptr_t>(p)] = {bytes, kind};
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

}  // namespace kvsim::emu
