// full: every (layer, KV head) attends every token 0..p: the reference the others are measured against.
#include "traces/select/selector.hpp"
#include "policies/full/policy.hpp"

namespace kvsim::policies::full {
using namespace kvsim::replay;

namespace {
class FullSelector final : public TraceSelector {
 public:
  void prefill(const TraceData&) override {}
  void select(const TraceData&, int64_t, std::vector<HeadSelection>& out) override {
    for (HeadSelection& h : out) h.all = true;
  }
};
}  // namespace

std::unique_ptr<TraceSelector> make_selector(const ParamValues&) { return std::make_unique<FullSelector>(); }

}  // namespace kvsim::policies::full
