#include "kernels/emu/counters.hpp"

namespace kvsim::emu {
namespace {
thread_local CountScope* innermost = nullptr;
thread_local bool keep_ids = false;
}  // namespace

uint64_t Counts::sectors() const {
  uint64_t n = 0;
  for (const auto& l : launches) n += l.sectors();
  return n;
}
uint64_t Counts::useful_bytes() const {
  uint64_t n = 0;
  for (const auto& l : launches) n += l.useful_bytes();
  return n;
}

CountScope::CountScope() : outer_(innermost) { innermost = this; }
CountScope::~CountScope() { innermost = outer_; }

CountPause::CountPause() : saved_(innermost) { innermost = nullptr; }
CountPause::~CountPause() { innermost = saved_; }

bool CountSink::active() { return innermost != nullptr; }
void CountSink::launch(const LaunchCounts& c) {
  for (CountScope* s = innermost; s; s = s->outer_) s->counts_.launches.push_back(c);
}
void CountSink::memset_op() {
  for (CountScope* s = innermost; s; s = s->outer_) ++s->counts_.memsets;
}
void CountSink::copy(size_t bytes, bool blocking) {
  for (CountScope* s = innermost; s; s = s->outer_) {
    ++s->counts_.copies;
    s->counts_.copy_bytes += bytes;
    if (blocking) ++s->counts_.host_syncs;
  }
}
void CountSink::host_sync() {
  for (CountScope* s = innermost; s; s = s->outer_) ++s->counts_.host_syncs;
}

KeepSectorIds::KeepSectorIds() : saved_(keep_ids) { keep_ids = true; }
KeepSectorIds::~KeepSectorIds() { keep_ids = saved_; }
bool CountSink::keep_sector_ids() { return keep_ids; }

}  // namespace kvsim::emu
