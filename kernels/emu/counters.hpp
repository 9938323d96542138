// What emulated kernels did, counted the way the hardware would see it: per launch, the warp-level
// global accesses and the 32-byte sectors they touch after coalescing, the bytes the lanes actually
// asked for, and per host thread the launches, memsets, copies and host synchronizations. This is what
// `kvsim validate --device emu` compares with the phase model's bytes and launches (issue #28 item 2).
//
// Counting is off unless a CountScope is alive on the calling host thread, so ordinary kernel tests pay
// nothing for it. Scopes nest: every live scope of the thread sees every event.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/emu/vector_types.hpp"

namespace kvsim::emu {

// One kernel launch. Global traffic only (device and mapped pinned memory); shared memory is on-chip.
struct LaunchCounts {
  std::string kernel;  // the name as written at the launch (KVSIM_LAUNCH's first argument)
  dim3 grid{}, block{};
  size_t dynamic_shared_bytes = 0;
  // Warp-level memory instructions: the lanes of one warp executing the same access (same source
  // location, same dynamic instance) form one instruction; its sectors are the distinct 32-byte aligned
  // segments the lanes touch, its useful bytes the distinct bytes they touch.
  uint64_t load_instructions = 0, store_instructions = 0, atomic_instructions = 0;
  uint64_t load_sectors = 0, store_sectors = 0, atomic_sectors = 0;
  uint64_t load_useful_bytes = 0, store_useful_bytes = 0, atomic_useful_bytes = 0;

  // Distinct 32-byte sectors the whole launch read, plus those it wrote (each counted once however often
  // it is read, or written; a sector both read and written counts twice, an atomic's in both): its DRAM
  // traffic if L2 holds the launch's working set — what the phase model's bytes stand for. The per-instruction sectors above are L1 requests; repeated reads of a small input (a
  // query, a radix select's passes over one row) count there every time.
  uint64_t unique_sectors = 0;
  uint64_t unique_bytes() const { return 32 * unique_sectors; }
  // Of those, the sectors it read (loads and atomics): the share of its load instructions' sectors that
  // are first touches (DRAM) rather than repeats (L2) is unique_read_sectors / (load + atomic sectors).
  uint64_t unique_read_sectors = 0;
  // The distinct sectors themselves (sorted sector numbers, read and written apart), kept only while a
  // KeepSectorIds is alive on the thread: a caller that asks what several launches move together (the
  // union over a call whose working set stays in L2) needs the sets, not their sizes.
  std::vector<uint64_t> read_sector_ids, written_sector_ids;
  // Distinct sectors of mapped pinned host memory the launch touched (a zero-copy gather): they cross
  // the host link, so they are not in unique_sectors. The per-instruction counts above include them.
  uint64_t host_sectors = 0;
  // The sectors the load instructions above requested from host memory (repeats count).
  uint64_t host_load_sectors = 0;

  // What bounds a block that has the GPU to itself (the time model, validate/kernel_time_model.hpp):
  // the longest chain of memory instructions one thread waits on, joined at barriers. Each barrier
  // interval contributes the most any thread of the block issued in it; the block's chain is the sum over
  // its intervals, and the launch's is the longest block's. Global loads and atomics count in
  // `chain_global` (a store does not stall its thread); shared-memory accesses in `chain_shared`.
  // `barriers` is the most __syncthreads any block released.
  uint64_t chain_global = 0, chain_shared = 0, barriers = 0;
  // Static __shared__ bytes the launch's kernel touched (every array it accessed, whole); with
  // dynamic_shared_bytes, the block's shared memory, which bounds the blocks an SM holds at once.
  uint64_t static_shared_bytes = 0;

  uint64_t sectors() const { return load_sectors + store_sectors + atomic_sectors; }
  uint64_t sector_bytes() const { return 32 * sectors(); }
  uint64_t useful_bytes() const { return load_useful_bytes + store_useful_bytes + atomic_useful_bytes; }
  // useful / fetched: 1 for perfectly coalesced, aligned accesses.
  double efficiency() const { return sectors() ? double(useful_bytes()) / double(sector_bytes()) : 1.0; }
};

struct Counts {
  std::vector<LaunchCounts> launches;  // in launch order
  uint64_t memsets = 0;      // cudaMemset[Async]: one device operation each (a launch on a GPU)
  uint64_t copies = 0;       // cudaMemcpy[Async] of any direction
  uint64_t copy_bytes = 0;
  // Points where the host waits for the device: cudaDeviceSynchronize, cudaStreamSynchronize,
  // cudaEventSynchronize, and every blocking cudaMemcpy (CUDA returns only once the copy is done).
  uint64_t host_syncs = 0;

  uint64_t kernel_launches() const { return launches.size(); }
  uint64_t sectors() const;
  uint64_t useful_bytes() const;
};

// RAII: counts everything the calling host thread's emulated CUDA calls do while it is alive.
class CountScope {
 public:
  CountScope();
  ~CountScope();
  CountScope(const CountScope&) = delete;
  CountScope& operator=(const CountScope&) = delete;
  const Counts& counts() const { return counts_; }

 private:
  friend struct CountSink;
  friend class CountPause;
  Counts counts_;
  CountScope* outer_ = nullptr;
};

// RAII: while alive, nothing on this thread is counted (setting up a kernel's inputs inside a scope that
// should count only the kernel: uploads are copies and host synchronizations of their own).
class CountPause {
 public:
  CountPause();
  ~CountPause();
  CountPause(const CountPause&) = delete;
  CountPause& operator=(const CountPause&) = delete;

 private:
  CountScope* saved_;
};

// RAII: while alive, each counted launch also keeps its distinct sectors (LaunchCounts::read_sector_ids,
// written_sector_ids). Off by default: a large launch's sets are megabytes.
class KeepSectorIds {
 public:
  KeepSectorIds();
  ~KeepSectorIds();
  KeepSectorIds(const KeepSectorIds&) = delete;
  KeepSectorIds& operator=(const KeepSectorIds&) = delete;

 private:
  bool saved_;
};

// ---- called by the emulator itself ----
struct CountSink {
  static bool active();  // any scope alive on this thread
  static bool keep_sector_ids();  // a KeepSectorIds alive on this thread
  static void launch(const LaunchCounts& c);
  static void memset_op();
  static void copy(size_t bytes, bool blocking);
  static void host_sync();
};

}  // namespace kvsim::emu
