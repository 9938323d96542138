#include "kernels/emu/checker.hpp"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "kernels/emu/counters.hpp"
#include "kernels/emu/device_memory.hpp"
#include "kernels/emu/source_map.hpp"
#include "kernels/emu/thread_context.hpp"
#include "kernels/emu/traffic.hpp"

namespace kvsim::emu::checker {

#if KVSIM_EMU_CHECKER

namespace {
// KVSIM_EMU_CHECK=0 in the environment turns the judging (and the traffic counts) off for a process:
// the instrumented code still calls in, and returns at once. For long emulated runs (kvsim replay
// --device cuda on a real trace), where the checker costs several times the emulation itself.
const bool judging = [] {
  const char* e = std::getenv("KVSIM_EMU_CHECK");
  return !(e && std::string(e) == "0");
}();
}  // namespace

bool enabled() { return judging; }

namespace {

constexpr size_t kMaxReports = 12;  // findings listed per launch (all are counted)
// Bytes of "no man's land" on each side of a launch's dynamic shared memory (block_runner.cpp allocates
// them): an index that runs a little past either end lands there and is reported as out of bounds.
// An access this close past the end of a device allocation is reported against that allocation.
constexpr uintptr_t kNearGlobal = 4096;

enum class Fault : uint8_t {
  shared_race,
  shared_uninitialized,
  shared_out_of_bounds,
  global_out_of_bounds,
  host_pointer,
  global_uninitialized,
  unfenced_inter_block,
};

// One access as the shadow of a shared byte remembers it.
struct Seen {
  uint32_t epoch = 0;  // barrier interval (0: never)
  uint32_t clock = 0;  // the thread's own warp clock at the access
  uint32_t pc = 0;     // SourceLine id
  uint16_t tid = 0;
  uint8_t atomic = 0;
};
// The shadow of one shared byte: its last writer and up to two readers of the current interval.
struct Cell {
  Seen w, r[2];
};

struct BlockWrites {
  uint64_t last_write = 0, last_fence = 0;  // launch-wide stamps
  bool fenced() const { return last_fence > last_write; }
};

// The checker's view of the launch running on this OS thread (one at a time per thread).
struct State {
  bool in_launch = false;
  std::string kernel;
  dim3 grid{}, block{};
  unsigned threads = 0;
  uintptr_t dyn_lo = 0, dyn_hi = 0, dyn_redzone = 0;
  uintptr_t tls_lo = 0, tls_hi = 0;  // this thread's TLS block of the emulator's module
  uintptr_t anchor_lo = 0, anchor_hi = 0;  // tls_thread within it (threadIdx & co: not shared memory)
  uintptr_t os_stack_lo = 0, os_stack_hi = 0;
  // Shared memory.
  uint32_t epoch = 0, block_first_epoch = 0, block_serial = 0;
  uint3 block_idx{};
  uint32_t block_linear = 0;
  std::vector<uint32_t> clocks;  // threads × 32: thread t's view of the clocks of its warp's lanes
  std::vector<Cell> dyn_cells;
  std::vector<std::unique_ptr<Cell[]>> static_cells;  // per static array, on first touch
  std::vector<uint32_t> static_poisoned;               // per static array: block_serial it was poisoned in
  std::unordered_map<uint32_t, uint32_t> instruction_array;  // instruction -> static array it touched
  // Global memory.
  uint32_t launch_serial = 0;
  uint64_t stamp = 0;
  BlockWrites current;
  bool block_did_atomic = false;
  std::unordered_map<uint32_t, BlockWrites> finished_blocks;
  // Findings.
  std::vector<std::string> reports;
  size_t findings = 0;
  std::set<std::tuple<Fault, uint32_t, uint32_t>> seen;
  // Traffic.
  bool counting = false;
  LaunchCounts traffic_counts;
  TrafficCounter traffic;
  std::vector<uint8_t> static_used;  // per static __shared__ array: touched in this launch
};
// The state lives in a thread_local with constructors (its first use initializes it), reached on the
// hot path through a plain pointer: a thread_local with a constructor costs a call on every access.
thread_local State state_storage;
thread_local State* st_ptr = nullptr;
inline State& st() { return *st_ptr; }
std::atomic<uint32_t> next_launch_serial{0};  // tells launches apart in the per-word store shadow

// The last allocations this thread found (a kernel reads and writes a few buffers in turn) and the gap
// of its last miss, valid while no allocation comes or goes.
struct AllocationCache {
  static constexpr unsigned kWays = 8;
  uint64_t generation = 0;
  AllocationView hits[kWays];
  // Per way: every byte was written when it was looked up. Bits are only ever set until the allocation
  // goes (and with it this cache's generation), so loads from it need no per-byte check.
  bool full[kWays] = {};
  unsigned next = 0;  // the next way to fill
  static constexpr unsigned kHints = 1024;
  uint8_t way_of[kHints] = {};  // per instruction (id modulo kHints): the way it hit last
  uintptr_t gap_lo = 0, gap_hi = 0;
};
thread_local AllocationCache alloc_cache;

// The allocation holding a (null: then gap_lo is the end of the allocation below a, 0 when none).
// `instruction` picks the way tried first: the one its previous access hit (one instruction mostly
// touches one buffer, while a kernel alternates between several).
const AllocationView* find(uintptr_t a, uintptr_t& gap_lo, uint32_t instruction) {
  AllocationCache& c = alloc_cache;
  const uint64_t g = allocation_generation();
  uint8_t& hint = c.way_of[instruction % AllocationCache::kHints];
  if (c.generation == g) {
    const AllocationView* h = &c.hits[hint];
    if (a >= h->begin && a < h->end) return h;
    for (unsigned k = 0; k < AllocationCache::kWays; ++k) {
      h = &c.hits[k];
      if (a >= h->begin && a < h->end) {
        hint = uint8_t(k);
        return h;
      }
    }
    if (a >= c.gap_lo && a < c.gap_hi) {
      gap_lo = c.gap_lo;
      return nullptr;
    }
  } else {
    c = AllocationCache{};
    c.generation = g;
  }
  uintptr_t lo = 0, hi = 0;
  AllocationView v;
  if (find_allocation(a, v, lo, hi)) {
    hint = uint8_t(c.next++ % AllocationCache::kWays);
    c.hits[hint] = v;
    c.full[hint] = fully_written(v);
    return &c.hits[hint];
  }
  c.gap_lo = lo, c.gap_hi = hi;
  gap_lo = lo;
  return nullptr;
}

std::string coords(uint3 v) {
  std::ostringstream o;
  o << "(" << v.x << "," << v.y << "," << v.z << ")";
  return o.str();
}
std::string thread_name(unsigned tid) {
  const dim3 b = st().block;
  return "thread " + coords({tid % b.x, (tid / b.x) % b.y, tid / (b.x * b.y)});
}
std::string at(uint32_t pc) {
  const SourceLine& l = source_line_by_id(pc);
  return std::string(l.file) + ":" + std::to_string(l.line);
}
const char* verb(Access k) { return k == Access::load ? "reads" : k == Access::store ? "writes" : "atomically updates"; }
std::string hex(uintptr_t v) {
  std::ostringstream o;
  o << "0x" << std::hex << v;
  return o.str();
}

// Records a finding once per (fault, instruction, other instruction); `what` builds its text.
// Out of line and cold: the judging functions stay small on their (hot) path without findings.
template <class F>
[[gnu::noinline, gnu::cold]] void report(Fault f, uint32_t pc, uint32_t other, F&& what) {
  if (!st().seen.emplace(f, pc, other).second) return;
  ++st().findings;
  if (st().reports.size() < kMaxReports) st().reports.push_back("block " + coords(st().block_idx) + ": " + what());
}

// ---- shared memory ----

uint32_t own_clock(unsigned tid) { return st().clocks[size_t(tid) * 32 + tid % 32]; }
// Whether an earlier access by `earlier` (its clock then) is ordered before thread `me`'s access:
// its own, or a lane of the same warp that has since met `me` at a warp-synchronous point.
bool ordered(const Seen& earlier, unsigned me) {
  if (earlier.tid == me) return true;
  if (earlier.tid / 32 != me / 32) return false;
  return st().clocks[size_t(me) * 32 + earlier.tid % 32] > earlier.clock;
}

[[gnu::noinline, gnu::cold]] void race(const Seen& earlier, Access earlier_kind, unsigned me, Access kind, uint32_t pc, const std::string& what) {
  report(Fault::shared_race, earlier.pc, pc, [&] {
    const bool same_warp = earlier.tid / 32 == me / 32;
    return "shared-memory race on " + what + ": " + thread_name(earlier.tid) + " " + verb(earlier_kind) + " it at " +
           at(earlier.pc) + " and " + thread_name(me) + " " + verb(kind) + " it at " + at(pc) +
           (same_warp ? " with no __syncthreads, __syncwarp or warp collective naming both lanes between them"
                      : " with no __syncthreads between them (different warps)");
  });
}

// One access to shared bytes [cells, cells + n); `what(i)` names byte i for a report.
template <class Name>
void shared_access(Cell* cells, size_t n, Access kind, uint32_t pc, Name&& what) {
  if (st().counting && kind != Access::store) st().traffic.shared_step(tls_thread.linear);
  const unsigned me = tls_thread.linear;
  const uint32_t e = st().epoch;
  const Seen mine{e, own_clock(me), pc, uint16_t(me), uint8_t(kind == Access::atomic)};
  for (size_t i = 0; i < n; ++i) {
    Cell& c = cells[i];
    const bool atomic = kind == Access::atomic;
    if (c.w.epoch == e && !ordered(c.w, me) && !(atomic && c.w.atomic))
      race(c.w, c.w.atomic ? Access::atomic : Access::store, me, kind, pc, what(i));
    if (kind != Access::load) {
      for (const Seen& r : c.r)
        if (r.epoch == e && !ordered(r, me) && !(atomic && r.atomic))
          race(r, r.atomic ? Access::atomic : Access::load, me, kind, pc, what(i));
    }
    if (kind != Access::store && c.w.epoch < st().block_first_epoch)
      report(Fault::shared_uninitialized, pc, 0, [&] {
        return thread_name(me) + " " + verb(kind) + " " + what(i) + " at " + at(pc) +
               ", which no thread of the block has written (shared memory starts undefined)";
      });
    if (kind != Access::load) c.w = mine;
    if (kind != Access::store) {
      Seen& slot = c.r[0].epoch != e || c.r[0].tid == me ? c.r[0] : c.r[1];
      slot = mine;
    }
  }
}

void dynamic_shared_access(uintptr_t a, size_t n, Access kind, const SourceLine& src) {
  if (a < st().dyn_lo || a + n > st().dyn_hi) {
    report(Fault::shared_out_of_bounds, src.id, 0, [&] {
      return thread_name(tls_thread.linear) + " " + verb(kind) + " " + std::to_string(n) + " bytes at offset " +
             std::to_string(intptr_t(a - st().dyn_lo)) + " of dynamic shared memory at " + at(src.id) +
             ": out of bounds (the launch has " + std::to_string(st().dyn_hi - st().dyn_lo) + " bytes)";
    });
    return;
  }
  const size_t off = a - st().dyn_lo;
  shared_access(&st().dyn_cells[off], n, kind, src.id,
                [&](size_t i) { return "dynamic shared memory[byte " + std::to_string(off + i) + "]"; });
}

void static_shared_access(uintptr_t a, size_t n, Access kind, const SourceLine& src) {
  const StaticSharedTable& t = static_shared();
  if (!t.loaded) {  // a stripped binary: the block is known, its arrays are not; say so once per process
    static const bool said = [&] {
      std::fprintf(stderr, "kvsim CUDA emulator: checker: __shared__ arrays are not checked (%s)\n", t.problem.c_str());
      return true;
    }();
    (void)said;
    return;
  }
  const uintptr_t off = a - st().tls_lo;
  const StaticSharedArray* arr = static_shared_at(off);
  if (!arr || off + n > arr->offset + arr->bytes) {
    report(Fault::shared_out_of_bounds, src.id, 0, [&] {
      std::string near;
      for (const auto& x : t.arrays)
        if (x.offset <= off) near = x.name + " (" + std::to_string(x.bytes) + " bytes) ends " +
                                    std::to_string(intptr_t(off - x.offset - x.bytes)) + " bytes before it";
      return "static shared memory out of bounds: " + thread_name(tls_thread.linear) + " " + verb(kind) + " " +
             std::to_string(n) + " bytes at " + at(src.id) + " outside every __shared__ array" +
             (arr ? " (it runs past the end of " + arr->name + ")" : near.empty() ? "" : " (" + near + ")");
    });
    return;
  }
  const uint32_t idx = uint32_t(arr - t.arrays.data());
  if (st().counting) st().static_used[idx] = 1;
  // One instruction that reached two arrays indexes past the first one into its neighbour.
  auto [it, fresh] = st().instruction_array.emplace(src.id, idx);
  if (!fresh && it->second != idx) {
    report(Fault::shared_out_of_bounds, src.id, 1, [&] {
      return "static shared memory out of bounds: " + thread_name(tls_thread.linear) + " " + verb(kind) + " " +
             arr->name + " at " + at(src.id) + ", an instruction that accessed " + t.arrays[it->second].name +
             " before: an index past the end of one __shared__ array reaches another";
    });
    return;
  }
  if (st().static_poisoned[idx] != st().block_serial) {  // first touch in this block: garbage, as on a GPU
    std::memset(reinterpret_cast<void*>(st().tls_lo + arr->offset), 0xff, arr->bytes);
    st().static_poisoned[idx] = st().block_serial;
  }
  auto& cells = st().static_cells[idx];
  if (!cells) cells = std::make_unique<Cell[]>(arr->bytes);
  const size_t first = off - arr->offset;
  shared_access(&cells[first], n, kind, src.id,
                [&](size_t i) { return arr->name + "[byte " + std::to_string(first + i) + "]"; });
}

// ---- global memory ----

[[gnu::noinline]] void unknown_address(uintptr_t a, size_t n, Access kind, const SourceLine& src, uintptr_t gap_lo) {
  if (gap_lo && a >= gap_lo && a - gap_lo < kNearGlobal) {
    report(Fault::global_out_of_bounds, src.id, 0, [&] {
      return thread_name(tls_thread.linear) + " " + verb(kind) + " " + std::to_string(n) + " bytes at " + at(src.id) +
             " " + std::to_string(a - gap_lo) + " bytes past the end of a device allocation: out of bounds";
    });
    return;
  }
  if (a >= st().os_stack_lo && a < st().os_stack_hi) return;  // the launch's own arguments, being copied
  report(Fault::host_pointer, src.id, 0, [&] {
    return thread_name(tls_thread.linear) + " " + verb(kind) + " " + std::to_string(n) + " bytes at address " +
           hex(a) + " at " + at(src.id) +
           ", which is neither device memory (cudaMalloc / cudaMallocHost), shared memory nor the thread's own "
           "stack: a host pointer dereferenced in a kernel (e.g. one inside a Params struct), an illegal address "
           "on a GPU";
  });
}

void inter_block_check(const AllocationView& v, uintptr_t a, size_t n, const SourceLine& src) {
  const uint64_t* words = *v.writers;
  if (!words || *v.store_launch != st().launch_serial) return;  // no kernel store into it in this launch
  for (uintptr_t w = (a - v.begin) / 4; w <= (a + n - 1 - v.begin) / 4; ++w) {
    const uint64_t x = words[w];
    if (uint32_t(x >> 32) != st().launch_serial || uint32_t(x) == st().block_linear + 1 || uint32_t(x) == 0) continue;
    const uint32_t writer = uint32_t(x) - 1;
    const auto f = st().finished_blocks.find(writer);
    const bool fenced = f != st().finished_blocks.end() && f->second.fenced();
    if (fenced && st().block_did_atomic) continue;
    report(Fault::unfenced_inter_block, src.id, writer, [&] {
      const dim3 g = st().grid;
      const uint3 wb{writer % g.x, (writer / g.x) % g.y, writer / (g.x * g.y)};
      return thread_name(tls_thread.linear) + " reads at " + at(src.id) + " a word that block " + coords(wb) +
             " of the same launch wrote" +
             (!fenced ? " with no __threadfence after its writes"
                      : ", before this block performed any atomic (no fence + atomic counter orders them)") +
             ": blocks are unordered on a GPU";
    });
    return;
  }
}

void global_access(uintptr_t a, size_t n, Access kind, const SourceLine& src) {
  uintptr_t gap_lo = 0;
  const AllocationView* found = find(a, gap_lo, src.id);
  if (!found) return unknown_address(a, n, kind, src, gap_lo);
  const AllocationView& v = *found;
  if (a + n > v.end) {
    report(Fault::global_out_of_bounds, src.id, 0, [&] {
      return thread_name(tls_thread.linear) + " " + verb(kind) + " " + std::to_string(n) + " bytes at offset " +
             std::to_string(a - v.begin) + " of a device allocation of " + std::to_string(v.end - v.begin) +
             " bytes at " + at(src.id) + ": out of bounds";
    });
    n = v.end - a;
  }
  if (st().counting)
    st().traffic.record(tls_thread.linear, src.id, TrafficKind(uint8_t(kind)), a, n, v.kind != MemoryKind::device);
  if (v.kind != MemoryKind::device) return;  // pinned host memory: the host writes it unseen
  const bool full = alloc_cache.full[&v - alloc_cache.hits];
  if (kind != Access::store && !full && !all_written_in(v, a, n))
    report(Fault::global_uninitialized, src.id, 0, [&] {
      return thread_name(tls_thread.linear) + " " + verb(kind) + " " + std::to_string(n) + " bytes at offset " +
             std::to_string(a - v.begin) + " of a device allocation of " + std::to_string(v.end - v.begin) +
             " bytes at " + at(src.id) +
             " that nothing has written since cudaMalloc (no copy, memset, kernel or host store)";
    });
  if (kind == Access::load) inter_block_check(v, a, n, src);
  if (kind == Access::atomic) st().block_did_atomic = true;
  if (kind == Access::load) return;
  mark_written_in(v, a, n);
  if (kind == Access::store) {
    uint64_t* words = *v.writers ? *v.writers : writer_words(v);
    const uint64_t tag = uint64_t(st().launch_serial) << 32 | (st().block_linear + 1);
    for (uintptr_t w = (a - v.begin) / 4; w <= (a + n - 1 - v.begin) / 4; ++w) words[w] = tag;
    *v.store_launch = st().launch_serial;
    st().current.last_write = ++st().stamp;
  }
}

void host_store(uintptr_t a, size_t n) {
  uintptr_t gap_lo;
  const AllocationView* v = find(a, gap_lo, 0);
  if (v && v->written) mark_written_in(*v, a, std::min<uintptr_t>(n, v->end - a));
}

void judge(uintptr_t a, size_t n, Access kind, const SourceLine& src) {
  if (!st_ptr || !st().in_launch || n == 0) return;
  const ThreadContext& t = tls_thread;
  if (a >= t.stack_lo && a < t.stack_hi) return;  // the thread's own local memory
  if (st().dyn_hi && a + n > st().dyn_lo - st().dyn_redzone && a < st().dyn_hi + st().dyn_redzone)
    return dynamic_shared_access(a, n, kind, src);
  if (a >= st().tls_lo && a < st().tls_hi) {
    if (a >= st().anchor_lo && a < st().anchor_hi) return;  // threadIdx, blockDim, ...: the emulator's state
    return static_shared_access(a, n, kind, src);
  }
  global_access(a, n, kind, src);
}

void end_block() {
  if (st().block_serial == 0) return;
  if (st().current.last_write) st().finished_blocks[st().block_linear] = st().current;
  if (st().counting) st().traffic.flush(st().traffic_counts);
}

void reset() {
  st().in_launch = false;
  st().reports.clear();
  st().seen.clear();
  st().findings = 0;
  st().finished_blocks.clear();
  st().instruction_array.clear();
  st().traffic.reset();
  st().block_serial = 0;
}

}  // namespace

void access(const void* p, size_t bytes, Access kind, uintptr_t pc) {
  if (!judging) return;
  const auto a = reinterpret_cast<uintptr_t>(p);
  if (!tls_thread.lane) {
    if (kind != Access::load) host_store(a, bytes);
    return;
  }
  const SourceLine& src = source_line(pc);
  if (src.kernel) judge(a, bytes, kind, src);
}

void access_at(const void* p, size_t bytes, Access kind, const std::source_location& site) {
  if (!judging) return;
  const auto a = reinterpret_cast<uintptr_t>(p);
  if (!tls_thread.lane) {
    if (kind != Access::load) host_store(a, bytes);
    return;
  }
  judge(a, bytes, kind, source_line(site));
}

void fence() {
  if (st_ptr && st().in_launch && tls_thread.lane) st().current.last_fence = ++st().stamp;
}

void launch_begin(const char* kernel, dim3 grid, dim3 block, const unsigned char* dynamic_shared,
                  size_t dynamic_shared_bytes, uintptr_t redzone_bytes) {
  if (!judging) return;
  st_ptr = &state_storage;
  reset();
  State& s = st();
  s.in_launch = true;
  s.kernel = kernel;
  s.grid = grid, s.block = block;
  s.threads = block.x * block.y * block.z;
  s.dyn_lo = reinterpret_cast<uintptr_t>(dynamic_shared);
  s.dyn_hi = s.dyn_lo + (dynamic_shared ? dynamic_shared_bytes : 0);
  s.dyn_redzone = redzone_bytes;
  if (s.dyn_cells.size() < dynamic_shared_bytes) s.dyn_cells.resize(dynamic_shared_bytes);
  s.clocks.assign(size_t(s.threads) * 32, 0);
  load_source_lines();
  const StaticSharedTable& t = static_shared();
  s.tls_lo = reinterpret_cast<uintptr_t>(&tls_thread) - t.anchor_offset;
  s.tls_hi = t.block_known ? s.tls_lo + t.tls_bytes : s.tls_lo;
  s.anchor_lo = reinterpret_cast<uintptr_t>(&tls_thread);
  s.anchor_hi = s.anchor_lo + sizeof(ThreadContext);
  if (s.static_cells.size() != t.arrays.size()) {
    s.static_cells.resize(t.arrays.size());
    s.static_poisoned.assign(t.arrays.size(), 0);
  }
  if (!s.os_stack_hi) {
    pthread_attr_t attr;
    if (pthread_getattr_np(pthread_self(), &attr) == 0) {
      void* lo = nullptr;
      size_t size = 0;
      pthread_attr_getstack(&attr, &lo, &size);
      s.os_stack_lo = reinterpret_cast<uintptr_t>(lo);
      s.os_stack_hi = s.os_stack_lo + size;
      pthread_attr_destroy(&attr);
    }
  }
  s.launch_serial = next_launch_serial.fetch_add(1, std::memory_order_relaxed) + 1;
  s.stamp = 0;
  s.counting = CountSink::active();
  s.traffic_counts = LaunchCounts{};
  s.static_used.assign(t.arrays.size(), 0);
}

void block_begin(uint3 b) {
  if (!st_ptr) return;
  end_block();
  st().block_idx = b;
  st().block_linear = b.x + st().grid.x * (b.y + st().grid.y * b.z);
  ++st().block_serial;
  if (st().block_serial == 0) ++st().block_serial;
  st().block_first_epoch = ++st().epoch;
  st().current = BlockWrites{};
  st().block_did_atomic = false;
}

void barrier_released() {
  if (!st_ptr) return;
  ++st().epoch;
  if (st().in_launch && st().counting) st().traffic.barrier();
}

void warp_synced(unsigned first_thread, unsigned group) {
  if (!st_ptr || !st().in_launch) return;
  uint32_t merged[32] = {};
  for (unsigned k = 0; k < 32; ++k) {
    if (!(group >> k & 1u)) continue;
    uint32_t* c = &st().clocks[size_t(first_thread + k) * 32];
    ++c[k];  // each lane's own clock moves on, so what it did before the meeting is "before"
    for (unsigned j = 0; j < 32; ++j) merged[j] = std::max(merged[j], c[j]);
  }
  for (unsigned k = 0; k < 32; ++k)
    if (group >> k & 1u) std::memcpy(&st().clocks[size_t(first_thread + k) * 32], merged, sizeof merged);
}

std::string launch_end(LaunchCounts* counts) {
  if (!st_ptr || !st().in_launch) return {};
  end_block();
  if (counts) {
    if (st().counting) st().traffic.finish_launch(st().traffic_counts);
    const LaunchCounts& t = st().traffic_counts;
    counts->load_instructions = t.load_instructions, counts->store_instructions = t.store_instructions;
    counts->atomic_instructions = t.atomic_instructions;
    counts->load_sectors = t.load_sectors, counts->store_sectors = t.store_sectors;
    counts->atomic_sectors = t.atomic_sectors;
    counts->load_useful_bytes = t.load_useful_bytes, counts->store_useful_bytes = t.store_useful_bytes;
    counts->atomic_useful_bytes = t.atomic_useful_bytes;
    counts->unique_sectors = t.unique_sectors;
    counts->unique_read_sectors = t.unique_read_sectors;
    counts->read_sector_ids = std::move(st().traffic_counts.read_sector_ids);
    counts->written_sector_ids = std::move(st().traffic_counts.written_sector_ids);
    counts->host_sectors = t.host_sectors, counts->host_load_sectors = t.host_load_sectors;
    counts->chain_global = t.chain_global, counts->chain_shared = t.chain_shared, counts->barriers = t.barriers;
    const StaticSharedTable& table = static_shared();
    for (size_t i = 0; i < st().static_used.size() && i < table.arrays.size(); ++i)
      if (st().static_used[i]) counts->static_shared_bytes += table.arrays[i].bytes;
  }
  if (st().findings == 0) {
    reset();
    return {};
  }
  std::ostringstream o;
  o << "checker: kernel '" << st().kernel << "': " << st().findings << " finding" << (st().findings > 1 ? "s" : "");
  for (size_t i = 0; i < st().reports.size(); ++i) o << "\n  " << i + 1 << ". " << st().reports[i];
  if (st().findings > st().reports.size()) o << "\n  (" << st().findings - st().reports.size() << " more)";
  reset();
  return o.str();
}

void launch_abandoned() noexcept {
  if (!st_ptr) return;
  try {
    reset();
  } catch (...) {
  }
}

void mark_written(const void* p, size_t bytes) { mark_device_written(p, bytes); }

#else  // the checker compiled out (a sanitized build): the hooks do nothing

bool enabled() { return false; }
void access(const void*, size_t, Access, uintptr_t) {}
void access_at(const void*, size_t, Access, const std::source_location&) {}
void fence() {}
void launch_begin(const char*, dim3, dim3, const unsigned char*, size_t, uintptr_t) {}
void block_begin(uint3) {}
void barrier_released() {}
void warp_synced(unsigned, unsigned) {}
std::string launch_end(LaunchCounts*) { return {}; }
void launch_abandoned() noexcept {}
void mark_written(const void* p, size_t bytes) { mark_device_written(p, bytes); }

#endif

}  // namespace kvsim::emu::checker
