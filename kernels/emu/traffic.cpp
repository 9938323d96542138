#include "kernels/emu/traffic.hpp"

#include <algorithm>

#include "kernels/emu/counters.hpp"

namespace kvsim::emu {

void TrafficCounter::record(unsigned thread, uint32_t instruction, TrafficKind kind, uintptr_t addr, size_t bytes) {
  if (bytes == 0) return;
  const uint32_t instance = executions_[uint64_t(thread) << 32 | instruction]++;
  Instruction& in = instructions_[Key{thread / 32, instruction, instance}];
  in.kind = kind;
  in.ranges.emplace_back(addr, addr + bytes);
}

void TrafficCounter::flush(LaunchCounts& c) {
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
      case TrafficKind::load: c.load_instructions++, c.load_sectors += sectors, c.load_useful_bytes += useful; break;
      case TrafficKind::store: c.store_instructions++, c.store_sectors += sectors, c.store_useful_bytes += useful; break;
      case TrafficKind::atomic:
        c.atomic_instructions++, c.atomic_sectors += sectors, c.atomic_useful_bytes += useful;
        break;
    }
  }
  clear();
}

void TrafficCounter::clear() {
  executions_.clear();
  instructions_.clear();
}

}  // namespace kvsim::emu
