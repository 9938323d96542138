// Quality of configurations from a trace: each distinct (policy, parameters) is replayed once, and
// all the ones wanted together in one replay, so the full-attention ground truth is computed once
// and shared (replay). Points that differ only in scenario fields (context, batch, GPU...)
// share the replay of their parameters: quality is measured on the trace's own sequence.
//
// With use_file(), the cache also lives on disk (JSON, schema kvsim.quality_cache/1) and is reused
// by later runs of the same trace file (same path, size and modification time) with the same replay
// settings; a file for another trace or settings is ignored and replaced.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "sweep/spec.hpp"
#include "sweep/target_search.hpp"
#include "replay/replay.hpp"

namespace kvsim::sweep {

class QualityCache {
 public:
  explicit QualityCache(TraceSettings t);
  ~QualityCache();
  void use_file(const std::string& path);
  // Replays every wanted configuration not yet cached whose policy has a trace selector; returns how
  // many were replayed. Saves the file (atomically) when one is in use and something was replayed.
  size_t replay(const std::vector<std::pair<const Policy*, ParamValues>>& wanted, int threads,
                const std::function<void(double)>& progress = {});
  // Null when the configuration was not replayed (no selector).
  const replay::Quality* find(const Policy* p, const ParamValues& v) const;
  size_t size() const { return cache_.size(); }

 private:
  std::string identity() const;  // the trace file and replay settings entries are valid for
  void save() const;
  TraceSettings trace_;
  std::string file_;
  std::map<std::pair<std::string, ParamValues>, replay::Quality> cache_;
  struct Loaded;
  std::unique_ptr<Loaded> loaded_;  // the trace, read on the first replay
};

// The quality the target search reads (mean attention-mass recall and output error) of a
// configuration, replayed once on `cache`'s trace. A policy without a trace selector is an InputError
// naming `option` (the command-line option that gave the trace).
QualityFn quality_from_trace(QualityCache& cache, const std::string& option = "--trace");

}  // namespace kvsim::sweep
