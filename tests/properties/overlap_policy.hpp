// "overlap": a test-only policy whose extra entries overlap its selection (tests/properties/README.md).
// Its selection is every `stride`-th cached token at full resolution; beside it, as extra entries with
// their token ids in HeadSelection::extra_tokens, the first `sinks` tokens and the last `window` ones
// (an attention sink and a recent window added next to a selection, as a policy may do). Token 0 and
// the tokens of the window that fall on the stride are then both selected and extra: the replay's
// recall must count each once (replay/replay.hpp: the mass of tokens ∪ extra_tokens).
#pragma once
#include <memory>

#include "model/policy.hpp"
#include "traces/select/selector.hpp"

namespace kvsim::props::overlap {

const Policy& cost_model();
std::unique_ptr<replay::TraceSelector> make_selector(const ParamValues& p);

}  // namespace kvsim::props::overlap
