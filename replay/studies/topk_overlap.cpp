// CTKVR Obs. 2 on a trace: for random pairs of query rows of one (stored layer, query head), the cosine
// of the two queries against the overlap |S ∩ S'| / k of their top-k keys, over the keys both can see
// (0 .. the earlier position). The paper samples pairs at random positions and fits a trend line; so do
// we (least squares), and report Pearson's r and the mean overlap per cosine bin.
#include <Eigen/Dense>
#include <algorithm>
#include <cmath>

#include "traces/synthetic/counter_rng.hpp"
#include "replay/studies.hpp"

namespace kvsim::replay {

namespace {
// Indices of the k largest of x[0..m) (ties by the lower index), sorted ascending.
void topk_indices(const Eigen::VectorXf& x, int64_t m, int64_t k, std::vector<int32_t>& idx) {
  idx.resize(size_t(m));
  for (int64_t i = 0; i < m; ++i) idx[size_t(i)] = int32_t(i);
  std::nth_element(idx.begin(), idx.begin() + (k - 1), idx.end(), [&](int32_t a, int32_t b) {
    return x[a] > x[b] || (x[a] == x[b] && a < b);
  });
  idx.resize(size_t(k));
  std::sort(idx.begin(), idx.end());
}
}  // namespace

TopkOverlap topk_overlap(const TraceData& t, double topk_fraction, int pairs_per_head, uint64_t seed) {
  TopkOverlap out;
  out.topk_fraction = topk_fraction;
  const int nbins = 10;
  for (int i = 0; i < nbins; ++i) out.bins.push_back({-1.0 + 0.2 * i, -1.0 + 0.2 * (i + 1), 0, 0});
  if (t.S < 2 || pairs_per_head <= 0) return out;
  std::vector<int> kv_of(size_t(t.q_heads), -1);
  for (int h = 0; h < t.kv_heads; ++h)
    for (int q : t.group_of[size_t(h)]) kv_of[size_t(q)] = h;
  double sx = 0, sy = 0, sxx = 0, syy = 0, sxy = 0;
  int64_t n = 0;
  Eigen::VectorXf sa, sb;
  std::vector<int32_t> ia, ib, common;
  for (int l = 0; l < t.layers; ++l)
    for (int qh = 0; qh < t.q_heads; ++qh) {
      const int h = kv_of[size_t(qh)];
      if (h < 0) continue;
      const uint64_t stream = rng::key(seed, uint64_t(l), uint64_t(qh));
      for (int p = 0; p < pairs_per_head; ++p) {
        int64_t a = int64_t(rng::uniform(rng::word(stream, 2 * uint64_t(p))) * double(t.S));
        int64_t b = int64_t(rng::uniform(rng::word(stream, 2 * uint64_t(p) + 1)) * double(t.S - 1));
        if (b >= a) ++b;  // distinct rows
        if (a > b) std::swap(a, b);
        const int64_t m = t.position(a) + 1;  // keys both can see
        const int64_t k = std::clamp<int64_t>(int64_t(std::llround(topk_fraction * double(m))), 1, m);
        Eigen::Map<const Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>> K(t.k(l, h), m, t.d);
        Eigen::Map<const Eigen::VectorXf> qa(t.q(l, qh, a), t.d), qb(t.q(l, qh, b), t.d);
        sa.noalias() = K * qa;
        sb.noalias() = K * qb;
        topk_indices(sa, m, k, ia);
        topk_indices(sb, m, k, ib);
        common.clear();
        std::set_intersection(ia.begin(), ia.end(), ib.begin(), ib.end(), std::back_inserter(common));
        const double y = double(common.size()) / double(k);
        const double na = qa.norm(), nb = qb.norm();
        const double x = na > 0 && nb > 0 ? double(qa.dot(qb)) / (na * nb) : 0.0;
        const int bin = std::clamp(int((x + 1.0) / 0.2), 0, nbins - 1);
        out.bins[size_t(bin)].mean_overlap += y;
        ++out.bins[size_t(bin)].pairs;
        sx += x; sy += y; sxx += x * x; syy += y * y; sxy += x * y;
        ++n;
      }
    }
  for (CosineBin& b : out.bins)
    if (b.pairs > 0) b.mean_overlap /= double(b.pairs);
  out.pairs = n;
  if (n > 1) {
    const double cxx = sxx - sx * sx / double(n), cyy = syy - sy * sy / double(n), cxy = sxy - sx * sy / double(n);
    out.pearson = cxx > 0 && cyy > 0 ? cxy / std::sqrt(cxx * cyy) : 0.0;
    out.slope = cxx > 0 ? cxy / cxx : 0.0;
    out.intercept = (sy - out.slope * sx) / double(n);
  }
  return out;
}

}  // namespace kvsim::replay
