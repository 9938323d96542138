// "Device" memory under the emulator: host allocations recorded in a registry, so that the runtime can
// refuse what a GPU would refuse (a copy or memset that runs past its allocation, freeing a pointer that
// cudaMalloc did not return, a kernel argument that points into plain host memory) instead of silently
// corrupting the host heap. Page-locked host memory (cudaMallocHost) is registered too: with unified
// addressing a kernel may read it directly, and the staging gather does.
#pragma once
#include <cstddef>

namespace kvsim::emu {

enum class MemoryKind { device, pinned_host };

// nullptr when out of memory; bytes == 0 gives nullptr as well (the caller reports success, as CUDA does).
void* allocate(size_t bytes, MemoryKind kind);
// false when p is not the start of a live allocation of that kind (p == nullptr is accepted: true).
bool release(void* p, MemoryKind kind);
// Whether [p, p + bytes) lies inside one live allocation (device or pinned). bytes == 0 asks whether p
// is inside or one past the end of one.
bool accessible_from_device(const void* p, size_t bytes);

}  // namespace kvsim::emu
