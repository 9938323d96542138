// streaming (StreamingLLM, Xiao et al. 2024): the first `sinks` tokens (attention sinks) and the most
// recent `window` tokens of the cache 0..p (the current token included), the cost model's parameters.
// The same set for every layer and KV head: eviction by position does not look at the data.
#include <algorithm>

#include "traces/select/selector.hpp"
#include "policies/streaming/params.hpp"
#include "policies/streaming/policy.hpp"

namespace kvsim::policies::streaming {
using namespace kvsim::replay;

namespace {
class StreamingSelector final : public TraceSelector {
 public:
  explicit StreamingSelector(const Params& p)
      : sinks_(int64_t(p.sinks)), window_(int64_t(p.window)) {}
  void prefill(const TraceData&) override {}
  void select(const TraceData& t, int64_t s, std::vector<HeadSelection>& out) override {
    const int64_t p = t.position(s), n = p + 1;
    const int64_t sink_end = std::min(sinks_, n), recent_begin = std::max(sink_end, n - window_);
    tokens_.clear();
    for (int64_t i = 0; i < sink_end; ++i) tokens_.push_back(int32_t(i));
    for (int64_t i = recent_begin; i < n; ++i) tokens_.push_back(int32_t(i));
    for (HeadSelection& h : out) h.tokens = tokens_;
  }

 private:
  int64_t sinks_, window_;
  std::vector<int32_t> tokens_;
};
}  // namespace

std::unique_ptr<TraceSelector> make_selector(const ParamValues& p) {
  return std::make_unique<StreamingSelector>(param_table().read(p));
}

}  // namespace kvsim::policies::streaming
