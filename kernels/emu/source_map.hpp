// What the access checker (kernels/emu/checker.hpp) needs to know about the running program itself:
// which source line an instruction address belongs to (the DWARF line table, through elfutils' libdw),
// and where the static __shared__ arrays are (the ELF symbol table, through libelf).
//
// Static __shared__ is `static thread_local` under the emulator (kernels/emu/qualifiers.hpp), so each
// array is a TLS symbol of the module, named like _ZZ<kernel>E4hist, with its size. Its address in the
// calling OS thread is the module's TLS block plus the symbol's offset; the block is found from a known
// thread_local of the same module, the emulator's tls_thread (kernels/emu/thread_context.hpp).
#pragma once
#include <cstddef>
#include <cstdint>
#include <source_location>
#include <string>
#include <vector>

namespace kvsim::emu::checker {

struct SourceLine {
  const char* file = "?";  // relative to the project where it can be (kernels/optimized/topk.cu)
  unsigned line = 0;
  bool kernel = false;  // in a kernel source: not kernels/emu/, not a system header, not unknown
  uint32_t id = 0;      // dense, from 0: stands for the instruction in shadow records and counts
};

// Reads the line table, once per process: call it on an ordinary thread stack before source_line(pc)
// (libdw needs more stack than a GPU thread's fiber has).
void load_source_lines();
// The line of the instruction whose return address is `pc` (a callback's caller). Cached per address:
// the lookup of a known instruction is inline, since every access of a kernel makes one.
const SourceLine& source_line_uncached(uintptr_t pc);
namespace detail {
struct PcCacheEntry {
  uintptr_t pc = 0;
  const SourceLine* line = nullptr;
};
inline constexpr size_t kPcCache = 4096;
inline thread_local PcCacheEntry pc_cache[kPcCache];
}  // namespace detail
inline const SourceLine& source_line(uintptr_t pc) {
  detail::PcCacheEntry& e = detail::pc_cache[(pc ^ (pc >> 12)) & (detail::kPcCache - 1)];
  if (e.pc == pc && e.line) return *e.line;
  const SourceLine& l = source_line_uncached(pc);
  e = {pc, &l};
  return l;
}
// An access made in emulator code on a kernel's behalf (an atomic): its call site. Cached per site.
const SourceLine& source_line(const std::source_location& site);
const SourceLine& source_line_by_id(uint32_t id);

struct StaticSharedArray {
  uintptr_t offset = 0;  // in the module's TLS block
  size_t bytes = 0;
  std::string name;         // demangled, without the parameter list: topk_kernel::hist
  size_t shadow_base = 0;   // the first of its bytes in the checker's shadow of all static arrays
};

struct StaticSharedTable {
  std::vector<StaticSharedArray> arrays;  // sorted by offset
  uintptr_t anchor_offset = 0;             // tls_thread's offset in the block
  size_t tls_bytes = 0;                    // the module's whole TLS block
  size_t shadow_bytes = 0;                 // Σ arrays' bytes
  bool loaded = false;                     // false when the symbol table could not be read
  bool block_known = false;                // the TLS block's place is known (anchor_offset), loaded or not
  std::string problem;                     // why not
};
// Read once per process.
const StaticSharedTable& static_shared();
// The array holding TLS-block offset `off`, or null.
const StaticSharedArray* static_shared_at(uintptr_t off);

}  // namespace kvsim::emu::checker
