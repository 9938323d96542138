// ChunkKV's layer-wise index reuse premise (§3.3, Table 3, App. B.3) on a trace: the Jaccard similarity
// |I_l ∩ I_{l+1}| / |I_l ∪ I_{l+1}| of the token indices a policy keeps in adjacent layers. The paper
// saves the first head's indices at the end of prefill; we take every stored KV head (and report the
// first one alone too) at the first decode row, which is what a prefill-time policy keeps.
#include <algorithm>

#include "replay/studies.hpp"
#include "policies/registry.hpp"

namespace kvsim::replay {

namespace {
double jaccard(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {  // sorted, unique
  size_t i = 0, j = 0, inter = 0;
  while (i < a.size() && j < b.size()) {
    if (a[i] == b[j]) { ++inter; ++i; ++j; }
    else if (a[i] < b[j]) ++i;
    else ++j;
  }
  const size_t uni = a.size() + b.size() - inter;
  return uni > 0 ? double(inter) / double(uni) : 1.0;
}
}  // namespace

std::vector<LayerJaccard> layer_jaccard(const TraceData& t, const std::vector<PolicyRun>& runs) {
  std::vector<LayerJaccard> out;
  int64_t first = -1;
  for (int64_t s = 0; s < t.S && first < 0; ++s)
    if (t.position(s) >= t.P) first = s;
  for (const PolicyRun& r : runs) {
    LayerJaccard j;
    j.label = r.label.empty() ? r.policy : r.label;
    auto sel = make_selector(r.policy, r.params);
    if (!sel) throw std::logic_error("no trace selector for policy " + r.policy);
    if (first < 0) { out.push_back(j); continue; }
    sel->prefill(t);
    std::vector<HeadSelection> hs(size_t(t.layers) * t.kv_heads);
    sel->select(t, first, hs);
    const int64_t n = t.position(first) + 1;
    auto kept = [&](int l, int h) {
      const HeadSelection& x = hs[size_t(l) * t.kv_heads + h];
      std::vector<int32_t> v;
      if (x.all) {
        for (int64_t i = 0; i < n; ++i) v.push_back(int32_t(i));
      } else {
        v = x.tokens;
        v.insert(v.end(), x.extra_tokens.begin(), x.extra_tokens.end());
        std::sort(v.begin(), v.end());
        v.erase(std::unique(v.begin(), v.end()), v.end());
      }
      return v;
    };
    double kept_sum = 0;
    for (int l = 0; l < t.layers; ++l)
      for (int h = 0; h < t.kv_heads; ++h) kept_sum += double(kept(l, h).size());
    j.kept_tokens = kept_sum / double(std::max(1, t.layers * t.kv_heads));
    for (int l = 0; l + 1 < t.layers; ++l) {
      double sum = 0;
      for (int h = 0; h < t.kv_heads; ++h) {
        const double x = jaccard(kept(l, h), kept(l + 1, h));
        sum += x;
        if (h == 0) j.first_head.push_back(x);
      }
      j.per_pair.push_back(sum / double(t.kv_heads));
    }
    for (double x : j.per_pair) j.mean += x;
    for (double x : j.first_head) j.mean_first_head += x;
    if (!j.per_pair.empty()) {
      j.mean /= double(j.per_pair.size());
      j.mean_first_head /= double(j.first_head.size());
    }
    out.push_back(j);
  }
  return out;
}

}  // namespace kvsim::replay
