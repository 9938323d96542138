#include "sweep/space.hpp"

#include <cstdlib>

#include "core/error.hpp"

namespace kvsim::sweep {

Shard parse_shard(const std::string& text) {
  const size_t slash = text.find('/');
  char* end = nullptr;
  Shard s;
  bool ok = slash != std::string::npos && slash > 0;
  if (ok) {
    s.index = std::strtoull(text.c_str(), &end, 10);
    ok = end == text.c_str() + slash;
    s.count = std::strtoull(text.c_str() + slash + 1, &end, 10);
    ok = ok && end == text.c_str() + text.size() && slash + 1 < text.size();
  }
  if (!ok || s.count < 1 || s.index >= s.count)
    throw_input_error("command line", 0, "--shard",
                      "value '" + text + "' is not a shard; allowed: i/N with 0 <= i < N (e.g. 0/4 .. 3/4)");
  return s;
}

PointSpace::PointSpace(const SweepSpec& spec) : spec_(&spec) {
  for (size_t g = 0; g < spec.groups.size(); ++g) {
    if (!spec.groups[g].has_deployment_field()) continue;
    deploy_groups_.push_back(g);
    combos_ *= spec.groups[g].size();
  }
  offset_.push_back(0);
  for (const PolicyChoice& pc : spec.base.policies) {
    std::vector<size_t> gs;
    uint64_t n = 1;
    for (size_t g = 0; g < spec.groups.size(); ++g) {
      if (!spec.groups[g].applies_to(pc.policy)) continue;
      gs.push_back(g);
      n *= spec.groups[g].size();
    }
    groups_of_.push_back(std::move(gs));
    total_ += n;
    offset_.push_back(total_);
  }
}

void PointSpace::decode(uint64_t point, Coords& c) const {
  size_t p = 0;
  while (point >= offset_[p + 1]) ++p;
  c.policy = p;
  c.digit.assign(spec_->groups.size(), 0);
  uint64_t rest = point - offset_[p];
  const std::vector<size_t>& gs = groups_of_[p];
  for (size_t k = gs.size(); k-- > 0;) {
    const uint64_t n = spec_->groups[gs[k]].size();
    c.digit[gs[k]] = uint32_t(rest % n);
    rest /= n;
  }
}

size_t PointSpace::combo_of(const Coords& c) const {
  size_t combo = 0;
  for (size_t g : deploy_groups_) combo = combo * spec_->groups[g].size() + c.digit[g];
  return combo;
}

void PointSpace::combo_digits(size_t combo, std::vector<uint32_t>& digit) const {
  digit.assign(spec_->groups.size(), 0);
  for (size_t k = deploy_groups_.size(); k-- > 0;) {
    const size_t g = deploy_groups_[k], n = spec_->groups[g].size();
    digit[g] = uint32_t(combo % n);
    combo /= n;
  }
}

}  // namespace kvsim::sweep
