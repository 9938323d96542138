// streaming (StreamingLLM, Xiao et al. 2024): the first `sinks` tokens (attention sinks) and the most
// recent `window` tokens of the cache 0..p (the current token included), the cost model's parameters.
// The same set for every layer and KV head: eviction by position does not look at the data.
#include <algorithm>

#include "policies/kernel_selector.hpp"
#include "policies/streaming/params.hpp"
#include "policies/streaming/policy.hpp"

namespace kvsim::policies::streaming {
using namespace kvsim::replay;
using policies::KernelSelector;

namespace {
class StreamingSelector final : public KernelSelector {
 public:
  explicit StreamingSelector(const Params& p)
      : sinks_(int64_t(p.sinks)), window_(int64_t(p.window)) {}
  void prefill(const TraceData&) override {}
  void select(const TraceData& t, int64_t s, std::vector<HeadSelection>& out) override {
    const int64_t n = t.position(s) + 1;
    // The sinks, then the recent window (the backend's position rule: on the device the ids are written there).
    tokens_ = kernels().position_ids({.n = n, .sinks = sinks_, .window = window_});
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
