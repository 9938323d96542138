// "Device" memory under the emulator: host allocations recorded in a registry, so that the runtime can
// refuse what a GPU would refuse (a copy or memset that runs past its allocation, freeing a pointer that
// cudaMalloc did not return, a kernel argument that points into plain host memory) instead of silently
// corrupting the host heap. Page-locked host memory (cudaMallocHost) is registered too: with unified
// addressing a kernel may read it directly, and the staging gather does.
//
// For the access checker (kernels/emu/checker.hpp) each device allocation also carries its shadow: one
// "written" bit per byte (cleared by cudaMalloc, set by copies, memsets and stores) and, once a kernel
// stores into it, the launch and block of the last plain store per 4-byte word.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>

namespace kvsim::emu {

enum class MemoryKind { device, pinned_host };

// nullptr when out of memory; bytes == 0 gives nullptr as well (the caller reports success, as CUDA does).
void* allocate(size_t bytes, MemoryKind kind);
// false when p is not the start of a live allocation of that kind (p == nullptr is accepted: true).
bool release(void* p, MemoryKind kind);
// Whether [p, p + bytes) lies inside one live allocation (device or pinned). bytes == 0 asks whether p
// is inside or one past the end of one.
bool accessible_from_device(const void* p, size_t bytes);

// ---- for the access checker ----
struct AllocationView {
  uintptr_t begin = 0, end = 0;  // [begin, end): the bytes asked for
  MemoryKind kind = MemoryKind::device;
  uint64_t* written = nullptr;  // device memory: bit i of word i / 64 is byte begin + i; pinned: null
  uint64_t** writers = nullptr;  // device memory: the per-word last-store shadow, created on first use
  uint32_t* store_launch = nullptr;  // device memory: the checker's serial of the last launch that stored into it
  uint64_t serial = 0;           // tells allocations apart in reports (cudaMalloc order)
};
// The live allocation holding address a (true), or the gap between allocations around it: [gap_lo,
// gap_hi), with gap_lo the end of the allocation below (false). The view stays valid until the
// allocation is released; allocation_generation() changes whenever any allocation comes or goes.
bool find_allocation(uintptr_t a, AllocationView& out, uintptr_t& gap_lo, uintptr_t& gap_hi);
namespace detail {
extern std::atomic<uint64_t> allocation_generation;  // device_memory.cpp
}
// Inline: the access checker asks on every access whether its cached lookups still hold.
inline uint64_t allocation_generation() { return detail::allocation_generation.load(std::memory_order_relaxed); }
// Marks [p, p + bytes) of device memory written (the part inside one allocation).
void mark_device_written(const void* p, size_t bytes);
// Marks [a, a + bytes) written in allocation v (device memory; the caller keeps it inside v).
void mark_written_in(const AllocationView& v, uintptr_t a, size_t bytes);
// Whether every byte of [a, a + bytes) in allocation v was written.
bool all_written_in(const AllocationView& v, uintptr_t a, size_t bytes);
// Whether every byte of allocation v was written (a scan of its bitmap).
bool fully_written(const AllocationView& v);
// The per-word shadow of an allocation, created zeroed on first use (thread-safe).
uint64_t* writer_words(const AllocationView& v);

}  // namespace kvsim::emu
