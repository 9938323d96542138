// The emulator as a checker (issue #28 item 1): every global and shared-memory access of an emulated
// kernel is seen and judged against CUDA's rules, and the findings of a launch are thrown as one
// kvsim::emu::Error when it ends, each naming the kernel, block, thread(s), source line and memory.
//
// How the accesses are seen: the generated wrapper .cpp files that compile the .cu sources through the
// emulator (CMakeLists.txt) are compiled with g++ -fsanitize=thread at compile time only, so g++ calls
// __tsan_read4(addr), __tsan_write8(addr), __tsan_atomic32_fetch_add(...) ... around every load, store
// and atomic. libtsan is never linked: kernels/emu/tsan_hooks.cpp defines those functions and forwards
// them here. The instruction's address (the callback's return address) gives the source line through
// the DWARF line table (kernels/emu/source_map.hpp); only instructions whose line is in a kernel
// source (not kernels/emu/, not a system header) are judged, so the emulator's own inline code (copying
// the bound arguments, reading threadIdx) is not. The .cu sources are unchanged and nvcc never sees any
// of this. Where the whole build is sanitized (make test-asan) the checker is compiled out: enabled()
// is false and the hooks do nothing.
//
// What is checked, inside a kernel (rules and limits in kernels/README.md, "What it checks"):
//   shared memory: races between barriers (warp-synchronous points order lanes of one warp), reads of
//     bytes no thread of the block wrote, accesses outside the launch's dynamic shared memory or outside
//     every static __shared__ array; static __shared__ arrays are poisoned (0xff) per block, as dynamic
//     shared memory is;
//   global memory: accesses running past their allocation, addresses in no allocation (a host pointer,
//     e.g. one inside a Params struct), reads of device bytes never written (by a copy, a memset, a
//     kernel or host code), and reads of a word another block of the same launch wrote unless that
//     block fenced after writing and the reading block performed an atomic first (the threadfence +
//     atomic counter "last block" pattern).
// While a CountScope is alive it also counts each launch's global traffic per warp-level instruction
// (kernels/emu/counters.hpp), in kernels/emu/traffic.cpp.
#pragma once
#include <cstddef>
#include <cstdint>
#include <source_location>
#include <string>

#include "kernels/emu/vector_types.hpp"

namespace kvsim::emu {
struct LaunchCounts;
}

namespace kvsim::emu::checker {

// Whether accesses are judged: the build has the checker (not where the whole build is sanitized) and
// the environment does not turn it off (KVSIM_EMU_CHECK=0).
bool enabled();

enum class Access : uint8_t { load, store, atomic };

// ---- the instrumentation (kernels/emu/tsan_hooks.cpp) and the explicit hooks of the headers ----
// One access of `bytes` bytes at `addr` by the instruction whose return address is `pc`. Outside a
// kernel a store into device memory marks it written, and nothing else happens.
void access(const void* addr, size_t bytes, Access kind, uintptr_t pc);
// An atomic or __ldg from a kernel: the access happens in emulator code (kernels/emu/atomics.hpp), so
// the call site is passed in; it stands for the instruction (for the traffic counts as well).
void access_at(const void* addr, size_t bytes, Access kind, const std::source_location& site);
// __threadfence() in a kernel.
void fence();

// ---- the block runner (kernels/emu/block_runner.cpp) ----
void launch_begin(const char* kernel, dim3 grid, dim3 block, const unsigned char* dynamic_shared,
                  size_t dynamic_shared_bytes, uintptr_t redzone_bytes);
void block_begin(uint3 block);
void barrier_released();
// A warp collective of warp `first_thread / 32` released the lanes of `group` (bit i = lane i).
void warp_synced(unsigned first_thread, unsigned group);
// Ends the launch: fills the traffic fields of `counts` (may be null) and returns the findings as the
// text of an Error (empty when there are none).
std::string launch_end(LaunchCounts* counts);
// The launch failed for another reason: drop its state without reporting.
void launch_abandoned() noexcept;

// ---- the runtime (kernels/emu/runtime.cpp) ----
// Device bytes written by a copy or memset.
void mark_written(const void* p, size_t bytes);

}  // namespace kvsim::emu::checker

// Used by the emulator's headers for accesses that happen in emulator code on a kernel's behalf. Only
// the instrumented (checked) translation units report them: in any other one the plain accesses
// around them are not seen either, so checking the atomic alone would be judged out of context.
#if defined(__SANITIZE_THREAD__)
#define KVSIM_EMU_CHECK_ACCESS(p, bytes, kind, site)                                                      \
  ::kvsim::emu::checker::access_at(p, bytes, ::kvsim::emu::checker::Access::kind, site)
#define KVSIM_EMU_CHECK_FENCE() ::kvsim::emu::checker::fence()
#else
#define KVSIM_EMU_CHECK_ACCESS(p, bytes, kind, site) ((void)(site))
#define KVSIM_EMU_CHECK_FENCE() ((void)0)
#endif
