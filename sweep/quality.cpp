#include "sweep/quality.hpp"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "core/units.hpp"
#include "traces/format/trace_file.hpp"
#include "traces/synthetic/synthetic.hpp"
#include "policies/registry.hpp"

namespace kvsim::sweep {

namespace fs = std::filesystem;
using json = nlohmann::json;

struct QualityCache::Loaded {
  std::unique_ptr<TraceSource> source;  // the file, or the synthetic trace generated from its config
  replay::TraceData data;
};

namespace {
json summary_json(const replay::Summary& s) {
  return {{"mean", s.mean}, {"p10", s.p10}, {"p50", s.p50}, {"p90", s.p90}, {"min", s.min}, {"max", s.max}, {"n", s.n}};
}
replay::Summary summary_of(const json& j) {
  replay::Summary s;
  s.mean = j.at("mean");
  s.p10 = j.at("p10");
  s.p50 = j.at("p50");
  s.p90 = j.at("p90");
  s.min = j.at("min");
  s.max = j.at("max");
  s.n = j.at("n");
  return s;
}
}  // namespace

QualityCache::QualityCache(TraceSettings t) : trace_(std::move(t)) {}
QualityCache::~QualityCache() = default;

std::string QualityCache::identity() const {
  std::error_code ec;
  if (trace_.synthetic) {
    // A preset or config file, at the length and layers it was generated with: a changed file or
    // workload length is another trace.
    const SyntheticConfig& c = *trace_.synthetic;
    std::string layers;
    for (int l : c.store_layers) layers += std::to_string(l) + ",";
    const auto mtime = fs::exists(trace_.path, ec) ? fs::last_write_time(trace_.path, ec).time_since_epoch().count() : 0;
    return "synthetic:" + trace_.path + "|" + std::to_string(mtime) + "|seed=" + std::to_string(c.seed) +
           "|prompt=" + std::to_string(c.prompt_tokens) + "|generated=" + std::to_string(c.generated_tokens) +
           "|layers=" + layers + "|max_steps=" + std::to_string(trace_.max_steps) + "|topk=" + std::to_string(trace_.topk);
  }
  const auto size = fs::file_size(trace_.path, ec);
  const auto mtime = fs::last_write_time(trace_.path, ec).time_since_epoch().count();
  return fs::absolute(trace_.path).string() + "|" + std::to_string(size) + "|" + std::to_string(mtime) +
         "|max_steps=" + std::to_string(trace_.max_steps) + "|topk=" + std::to_string(trace_.topk);
}

void QualityCache::use_file(const std::string& path) {
  file_ = path;
  std::ifstream in(path);
  if (!in) return;  // no cache yet
  const json j = json::parse(in, nullptr, /*allow_exceptions=*/false);
  // A file that is not ours, or for another trace or settings, is ignored and replaced on save.
  if (!j.is_object() || j.value("schema", "") != "kvsim.quality_cache/1" || j.value("trace", "") != identity()) return;
  try {
    for (const json& e : j.at("entries")) {
      replay::Quality q;
      q.recall = summary_of(e.at("recall"));
      q.topk_recall = summary_of(e.at("topk_recall"));
      q.tokens = summary_of(e.at("tokens"));
      if (!e.at("error").is_null()) q.error = summary_of(e.at("error"));
      cache_[{e.at("policy").get<std::string>(), e.at("params").get<ParamValues>()}] = q;
    }
  } catch (const json::exception&) {
    cache_.clear();  // damaged: start over
  }
}

void QualityCache::save() const {
  json entries = json::array();
  for (const auto& [k, q] : cache_)
    entries.push_back({{"policy", k.first}, {"params", k.second}, {"recall", summary_json(q.recall)},
                       {"topk_recall", summary_json(q.topk_recall)}, {"tokens", summary_json(q.tokens)},
                       {"error", q.error ? summary_json(*q.error) : json(nullptr)}});
  const json j = {{"schema", "kvsim.quality_cache/1"}, {"trace", identity()}, {"entries", entries}};
  write_file_atomic(file_, j.dump(1) + "\n");
}

size_t QualityCache::replay(const std::vector<std::pair<const Policy*, ParamValues>>& wanted, int threads,
                            const std::function<void(double)>& progress) {
  std::vector<replay::PolicyRun> runs;
  std::set<std::pair<std::string, ParamValues>> queued;
  for (const auto& [p, v] : wanted) {
    std::pair<std::string, ParamValues> key{std::string(p->name()), v};
    if (!replay::has_selector(p->name()) || cache_.count(key) || !queued.insert(key).second) continue;
    runs.push_back({key.first, v, key.first});
  }
  if (runs.empty()) return 0;
  if (!loaded_) {
    loaded_ = std::make_unique<Loaded>();
    if (trace_.synthetic) loaded_->source = std::make_unique<SyntheticTrace>(*trace_.synthetic);
    else loaded_->source = TraceFile::open(trace_.path);
    loaded_->data = replay::load_trace_data(*loaded_->source, trace_.memory_limit_gib * kGiB, trace_.path);
  }
  replay::ReplayOptions o;
  o.topk = trace_.topk;
  o.max_steps = trace_.max_steps;
  o.threads = threads;
  o.measure_peak = false;
  if (progress) o.progress = progress;
  const replay::ReplayResult r = replay::run_replay(loaded_->data, runs, o);
  for (const replay::PolicyReplay& pr : r.policies) cache_[{pr.run.policy, pr.run.params}] = pr.overall;
  if (!file_.empty()) save();
  return runs.size();
}

const replay::Quality* QualityCache::find(const Policy* p, const ParamValues& v) const {
  const auto it = cache_.find({std::string(p->name()), v});
  return it == cache_.end() ? nullptr : &it->second;
}

QualityFn quality_from_trace(QualityCache& cache, const std::string& option) {
  return [&cache, option](const Policy& p, const ParamValues& v) {
    if (!replay::has_selector(p.name()))
      throw_input_error("command line", 0, option, "policy '" + std::string(p.name()) + "' has no trace selector");
    cache.replay({{&p, v}}, 0);
    const replay::Quality& q = *cache.find(&p, v);
    QualityValue qv{q.recall.mean, std::nullopt};
    if (q.error) qv.error = q.error->mean;
    return qv;
  };
}

}  // namespace kvsim::sweep
