// Global memory traffic of an emulated kernel as a GPU's memory system would see it (issue #28 item 2):
// the lanes of one warp executing the same instruction for the same time (the i-th execution of that
// instruction by each lane) form one warp-level instruction, whose cost is the distinct 32-byte aligned
// sectors its lanes touch; its useful bytes are the distinct bytes they asked for. The access checker
// (kernels/emu/checker.cpp) feeds it each global access of a kernel while a CountScope is alive
// (kernels/emu/counters.hpp) and flushes it at the end of every block, when every lane is done.
//
// Instructions are the host compiler's, so two corrections bring them back to the kernel's: the wrappers
// are compiled without scalar replacement of aggregates (a float4 load stays one 16-byte access), and a
// lane's back-to-back accesses at one source location that continue each other inside one naturally
// aligned 16-byte window are one access — a vector store g++ writes field by field (float4{...}), or a
// few consecutive scalars of one lane, which a GPU's L1 serves from the same sector fetch. A loop g++
// vectorizes within one emulated thread is one wider access per lane here, where the GPU build may issue
// several narrower ones.
#pragma once
#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace kvsim::emu {
struct LaunchCounts;

enum class TrafficKind : uint8_t { load, store, atomic };

class TrafficCounter {
 public:
  // An access by thread `thread` of the block (linear index) at instruction `instruction`.
  // `host`: the address is in mapped pinned host memory (its sectors cross the host link, not HBM).
  void record(unsigned thread, uint32_t instruction, TrafficKind kind, uintptr_t addr, size_t bytes, bool host = false);
  // Adds the block's warp-level instructions to `c` and forgets them.
  void flush(LaunchCounts& c);
  // At the end of a launch: the distinct sectors of all its blocks into c.unique_sectors; forgets them.
  void finish_launch(LaunchCounts& c);
  // A shared-memory access by `thread`: one step of its chain (see LaunchCounts::chain_shared).
  void shared_step(unsigned thread);
  // Every thread of the block passed a __syncthreads: the interval's longest chains join the block's.
  void barrier();
  void clear();  // the block's state (not the launch's sectors)
  void reset() { clear(), launch_read_.clear(), launch_written_.clear(), launch_host_.clear(); }

 private:
  struct Key {
    uint32_t warp, instruction, instance;
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    size_t operator()(const Key& k) const {
      return (size_t(k.instruction) * 0x9E3779B97F4A7C15ull) ^ (size_t(k.instance) << 20) ^ k.warp;
    }
  };
  struct Instruction {
    TrafficKind kind = TrafficKind::load;
    bool host = false;
    std::vector<std::pair<uintptr_t, uintptr_t>> ranges;  // [lo, hi) per lane access
  };
  // A lane's last access, which the next one may continue (see above).
  struct Last {
    uint32_t instruction = UINT32_MAX;
    TrafficKind kind = TrafficKind::load;
    uintptr_t lo = 0, hi = 0;
    Instruction* in = nullptr;  // the warp-level instruction it joined (stable: node-based map)
    size_t range = 0;           // its index there
  };
  std::unordered_map<uint64_t, uint32_t> executions_;  // (thread, instruction) -> times executed so far
  std::unordered_map<Key, Instruction, KeyHash> instructions_;
  std::vector<Last> last_;  // per thread of the block
  // Chains (LaunchCounts::chain_*): per thread, its steps in the current barrier interval; per block,
  // the sum of the intervals' maxima so far, and its barriers.
  std::vector<uint32_t> global_steps_, shared_steps_;
  uint64_t block_chain_global_ = 0, block_chain_shared_ = 0, block_barriers_ = 0;
  void close_interval();
  // Every sector the launch's blocks read and wrote so far, with repeats (an atomic both reads and writes).
  std::vector<uint64_t> launch_read_, launch_written_;
  std::vector<uint64_t> launch_host_;  // the sectors of mapped pinned host memory it touched
};

}  // namespace kvsim::emu
