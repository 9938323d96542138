// The selector registry: an explicit table, in the order of model/policy.cpp (self-registration does
// not survive a static library's linker).
#include <algorithm>

#include "traces/replay/selector.hpp"

namespace kvsim::replay {

namespace {
using Factory = std::unique_ptr<TraceSelector> (*)(const ParamValues&);
struct Entry {
  std::string_view policy;
  Factory make;
};
const Entry kTable[] = {
    {"full", &make_full_selector},
    {"streaming", &make_streaming_selector},
    {"snapkv", &make_snapkv_selector},
    {"quest", &make_quest_selector},
    {"chess", &make_chess_selector},
    {"sentencekv", &make_sentencekv_selector},
    {"chunkkv", &make_chunkkv_selector},
    {"sekv", &make_sekv_selector},
    {"ctkvr", &make_ctkvr_selector},
};
const Entry* find(std::string_view policy) {
  for (const Entry& e : kTable)
    if (e.policy == policy) return &e;
  return nullptr;
}
}  // namespace

std::unique_ptr<TraceSelector> make_selector(std::string_view policy, const ParamValues& params) {
  const Entry* e = find(policy);
  return e && e->make ? e->make(params) : nullptr;
}

bool has_selector(std::string_view policy) {
  const Entry* e = find(policy);
  return e && e->make;
}

}  // namespace kvsim::replay
