// Quality of sweep points from a trace: each distinct (policy, parameters) is replayed once, and all
// of them in one replay so the full-attention ground truth is computed once and shared
// (traces/replay). Points that differ only in scenario fields (context, batch, GPU...) share the
// replay of their parameters: quality is measured on the trace's own sequence.
#pragma once
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "sweep/spec.hpp"
#include "traces/replay/replay.hpp"

namespace kvsim::sweep {

class QualityCache {
 public:
  // Replays every wanted configuration not yet cached whose policy has a trace selector.
  void replay(const TraceSettings& t, const std::vector<std::pair<const Policy*, ParamValues>>& wanted, int threads,
              const std::function<void(double)>& progress = {});
  // Null when the configuration was not replayed (no selector).
  const replay::Quality* find(const Policy* p, const ParamValues& v) const;
  size_t size() const { return cache_.size(); }

 private:
  std::map<std::pair<std::string_view, ParamValues>, replay::Quality> cache_;
};

}  // namespace kvsim::sweep
