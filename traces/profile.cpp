#include "traces/profile.hpp"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <numeric>

namespace kvsim {

std::vector<int64_t> evenly_spaced(int64_t n, int64_t want) {
  std::vector<int64_t> out;
  if (n <= 0) return out;
  if (want <= 0 || want >= n) {
    out.resize(size_t(n));
    std::iota(out.begin(), out.end(), 0);
    return out;
  }
  for (int64_t i = 0; i < want; ++i) out.push_back(want == 1 ? n - 1 : i * (n - 1) / (want - 1));
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

namespace {

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// Attention statistics of one query against keys 0..p, accumulated into `acc`.
struct AttentionAccumulator {
  double sink = 0, sink_uniform = 0, recent = 0, entropy = 0, entropy_ratio = 0, mass90 = 0;
  int64_t count = 0;
  std::vector<double> probs;  // scratch

  void add(const Eigen::VectorXf& scores, int64_t p, const ProfileOptions& o) {
    const int64_t n = p + 1;
    const double mx = scores.head(n).maxCoeff();
    probs.resize(size_t(n));
    double z = 0;
    for (int64_t t = 0; t < n; ++t) z += probs[size_t(t)] = std::exp(double(scores[t]) - mx);
    double h = 0, s = 0, r = 0;
    for (int64_t t = 0; t < n; ++t) {
      const double pr = probs[size_t(t)] /= z;
      if (pr > 0) h -= pr * std::log(pr);
      if (t < o.sink_tokens) s += pr;
      if (t >= n - o.recent_tokens) r += pr;
    }
    // Tokens needed for 90% of the mass: the largest probabilities first.
    std::sort(probs.begin(), probs.end(), std::greater<>());
    double c = 0;
    int64_t k = 0;
    while (k < n && c < 0.9) c += probs[size_t(k++)];
    sink += s;
    sink_uniform += double(std::min<int64_t>(o.sink_tokens, n)) / double(n);
    recent += r;
    entropy += h;
    entropy_ratio += n > 1 ? h / std::log(double(n)) : 0;
    mass90 += double(k) / double(n);
    ++count;
  }
};

}  // namespace

TraceProfile profile_trace(const TraceSource& trace, const ProfileOptions& o) {
  const TraceMeta& m = trace.meta();
  const TraceTokens& tk = trace.tokens();
  const int d = m.model.head_dim;
  const float scale = 1.0f / std::sqrt(float(d));
  TraceProfile prof;

  // Decode-step queries (positions >= P); a trace without decode steps uses its prompt queries.
  std::vector<int64_t> decode;
  for (int64_t s = 0; s < tk.steps(); ++s)
    if (tk.query_positions[size_t(s)] >= m.prompt_tokens) decode.push_back(s);
  if (decode.empty()) {
    prof.decode_queries = false;
    decode.resize(size_t(tk.steps()));
    std::iota(decode.begin(), decode.end(), 0);
  }
  std::vector<int64_t> picked;
  for (int64_t i : evenly_spaced(int64_t(decode.size()), o.max_queries)) picked.push_back(decode[size_t(i)]);
  const int64_t last_pos = tk.query_positions[size_t(picked.back())];

  const std::vector<int64_t> layers = evenly_spaced(int64_t(m.layers.size()), o.max_layers);
  prof.layers_sampled = int(layers.size());
  prof.heads_sampled = int(m.query_heads.size());
  prof.queries_sampled = int(picked.size());

  AttentionAccumulator acc;
  std::vector<double> cos_sum(o.distances.size(), 0.0);
  std::vector<int64_t> cos_pairs(o.distances.size(), 0);
  RowMatrix K(last_pos + 1, d);
  Eigen::VectorXf q(d), scores(last_pos + 1);
  // Query rows of the decode range, for the cosine statistics: contiguous rows decode.front()..back().
  const int64_t s0 = decode.front(), s1 = decode.back() + 1;
  RowMatrix Q(s1 - s0, d);
  int loaded_kv = -1;
  for (int64_t ls : layers) {
    loaded_kv = -1;
    for (int qs = 0; qs < int(m.query_heads.size()); ++qs) {
      const int kv = trace.kv_slot_of_query(qs);
      if (kv < 0) continue;
      if (kv != loaded_kv) {
        trace.keys(int(ls), kv, 0, last_pos + 1, K.data());
        loaded_kv = kv;
      }
      trace.queries(int(ls), qs, s0, s1, Q.data());
      for (int64_t s : picked) {
        const int64_t p = tk.query_positions[size_t(s)];
        q = Q.row(s - s0).transpose() * scale;
        scores.head(p + 1).noalias() = K.topRows(p + 1) * q;
        acc.add(scores, p, o);
      }
      // Cosine of query pairs `distance` positions apart (positions looked up, not assumed contiguous).
      Q.rowwise().normalize();
      for (size_t di = 0; di < o.distances.size(); ++di) {
        const int64_t want = o.distances[di];
        for (int64_t i = s0, j = s0; i < s1; ++i) {
          const int64_t target = tk.query_positions[size_t(i)] + want;
          while (j < s1 && tk.query_positions[size_t(j)] < target) ++j;
          if (j >= s1) break;
          if (tk.query_positions[size_t(j)] != target) continue;
          cos_sum[di] += double(Q.row(i - s0).dot(Q.row(j - s0)));
          ++cos_pairs[di];
        }
      }
    }
  }
  if (acc.count > 0) {
    const double n = double(acc.count);
    prof.sink_share = acc.sink / n;
    prof.sink_share_uniform = acc.sink_uniform / n;
    prof.recent_share = acc.recent / n;
    prof.entropy = acc.entropy / n;
    prof.entropy_ratio = acc.entropy_ratio / n;
    prof.mass90_fraction = acc.mass90 / n;
  }
  for (size_t di = 0; di < o.distances.size(); ++di)
    prof.cosine.push_back({o.distances[di], cos_pairs[di] ? cos_sum[di] / double(cos_pairs[di]) : 0.0, cos_pairs[di]});
  return prof;
}

}  // namespace kvsim
