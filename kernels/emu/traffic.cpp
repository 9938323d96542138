#include "kernels/emu/traffic.hpp"

#include <algorithm>

#include "kernels/emu/counters.hpp"

namespace kvsim::emu {

void TrafficCounter::record(unsigned thread, uint32_t instruction, TrafficKind kind, uintptr_t addr, size_t bytes,
                            bool host) {
  if (bytes == 0) return;
  if (thread >= last_.size()) last_.resize(thread + 1);
  Last& l = last_[thread];
  // The continuation of this lane's previous access: same source location and kind, the next bytes, all
  // inside one aligned 16-byte window (the widest access one GPU thread issues).
  if (l.in && l.instruction == instruction && l.kind == kind && addr == l.hi && l.lo / 16 == (addr + bytes - 1) / 16) {
    l.hi = addr + bytes;
    l.in->ranges[l.range].second = l.hi;
    return;
  }
  if (kind != TrafficKind::store) {  // a load or atomic the thread waits on: one step of its chain
    if (thread >= global_steps_.size()) global_steps_.resize(thread + 1);
    ++global_steps_[thread];
  }
  const uint32_t instance = executions_[uint64_t(thread) << 32 | instruction]++;
  Instruction& in = instructions_[Key{thread / 32, instruction, instance}];
  in.kind = kind;
  in.host = in.host || host;
  in.ranges.emplace_back(addr, addr + bytes);
  l = Last{instruction, kind, addr, addr + bytes, &in, in.ranges.size() - 1};
}

void TrafficCounter::shared_step(unsigned thread) {
  if (thread >= shared_steps_.size()) shared_steps_.resize(thread + 1);
  ++shared_steps_[thread];
}

void TrafficCounter::close_interval() {
  uint32_t g = 0, sh = 0;
  for (uint32_t x : global_steps_) g = std::max(g, x);
  for (uint32_t x : shared_steps_) sh = std::max(sh, x);
  block_chain_global_ += g, block_chain_shared_ += sh;
  std::fill(global_steps_.begin(), global_steps_.end(), 0u);
  std::fill(shared_steps_.begin(), shared_steps_.end(), 0u);
}

void TrafficCounter::barrier() {
  close_interval();
  ++block_barriers_;
}

void TrafficCounter::flush(LaunchCounts& c) {
  close_interval();
  c.chain_global = std::max(c.chain_global, block_chain_global_);
  c.chain_shared = std::max(c.chain_shared, block_chain_shared_);
  c.barriers = std::max(c.barriers, block_barriers_);
  for (auto& [key, in] : instructions_) {
    auto& r = in.ranges;
    std::sort(r.begin(), r.end());
    uint64_t useful = 0, sectors = 0;
    uintptr_t lo = r[0].first, hi = r[0].second;
    uintptr_t last_sector = UINTPTR_MAX;  // the highest sector counted so far
    auto close = [&] {  // the merged interval [lo, hi)
      useful += hi - lo;
      const uintptr_t first = lo / 32, last = (hi - 1) / 32;
      sectors += last - first + 1 - (first == last_sector ? 1 : 0);
      for (uintptr_t x = first == last_sector ? first + 1 : first; x <= last; ++x) {
        if (in.host) {  // host memory: over the link, not HBM
          launch_host_.push_back(x);
          continue;
        }
        if (in.kind != TrafficKind::store) launch_read_.push_back(x);
        if (in.kind != TrafficKind::load) launch_written_.push_back(x);
      }
      last_sector = last;
    };
    for (size_t i = 1; i < r.size(); ++i) {
      if (r[i].first <= hi) {
        hi = std::max(hi, r[i].second);
      } else {
        close();
        lo = r[i].first, hi = r[i].second;
      }
    }
    close();
    switch (in.kind) {
      case TrafficKind::load:
        c.load_instructions++, c.load_sectors += sectors, c.load_useful_bytes += useful;
        if (in.host) c.host_load_sectors += sectors;
        break;
      case TrafficKind::store: c.store_instructions++, c.store_sectors += sectors, c.store_useful_bytes += useful; break;
      case TrafficKind::atomic:
        c.atomic_instructions++, c.atomic_sectors += sectors, c.atomic_useful_bytes += useful;
        break;
    }
  }
  clear();
}

void TrafficCounter::finish_launch(LaunchCounts& c) {
  // A sector read and written (an update in place) crosses the DRAM bus twice; one read many times, once.
  const bool keep = CountSink::keep_sector_ids();
  for (auto* v : {&launch_read_, &launch_written_}) {
    std::sort(v->begin(), v->end());
    const uint64_t distinct = uint64_t(std::unique(v->begin(), v->end()) - v->begin());
    c.unique_sectors += distinct;
    if (v == &launch_read_) c.unique_read_sectors += distinct;
    if (keep) {
      auto& ids = v == &launch_read_ ? c.read_sector_ids : c.written_sector_ids;
      ids.assign(v->begin(), v->begin() + std::ptrdiff_t(distinct));
    }
    v->clear();
  }
  std::sort(launch_host_.begin(), launch_host_.end());
  c.host_sectors += uint64_t(std::unique(launch_host_.begin(), launch_host_.end()) - launch_host_.begin());
  launch_host_.clear();
}

void TrafficCounter::clear() {
  executions_.clear();
  instructions_.clear();
  last_.clear();
  global_steps_.clear(), shared_steps_.clear();
  block_chain_global_ = block_chain_shared_ = block_barriers_ = 0;
}

}  // namespace kvsim::emu
