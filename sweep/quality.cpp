#include "sweep/quality.hpp"

#include <set>

#include "model/units.hpp"
#include "traces/trace_file.hpp"

namespace kvsim::sweep {

void QualityCache::replay(const TraceSettings& t, const std::vector<std::pair<const Policy*, ParamValues>>& wanted,
                          int threads, const std::function<void(double)>& progress) {
  std::vector<replay::PolicyRun> runs;
  std::set<std::pair<std::string_view, ParamValues>> queued;
  for (const auto& [p, v] : wanted) {
    const std::pair<std::string_view, ParamValues> key{p->name(), v};
    if (!replay::has_selector(p->name()) || cache_.count(key) || !queued.insert(key).second) continue;
    runs.push_back({std::string(p->name()), v, std::string(p->name())});
  }
  if (runs.empty()) return;
  const auto trace = TraceFile::open(t.path);
  const replay::TraceData data = replay::load_trace_data(*trace, t.memory_limit_gib * kGiB, t.path);
  replay::ReplayOptions o;
  o.topk = t.topk;
  o.max_steps = t.max_steps;
  o.threads = threads;
  o.measure_peak = false;
  if (progress) o.progress = progress;
  const replay::ReplayResult r = replay::run_replay(data, runs, o);
  for (const replay::PolicyReplay& pr : r.policies)
    cache_[{find_policy(pr.run.policy)->name(), pr.run.params}] = pr.overall;
}

const replay::Quality* QualityCache::find(const Policy* p, const ParamValues& v) const {
  const auto it = cache_.find({p->name(), v});
  return it == cache_.end() ? nullptr : &it->second;
}

}  // namespace kvsim::sweep
