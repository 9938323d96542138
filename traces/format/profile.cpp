#include "traces/format/profile.hpp"

#include <Eigen/Dense>
#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
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

// How many of the largest probabilities it takes to reach `target` total mass, in two linear passes:
// bucket the probabilities by their float exponent (each bucket spans a factor of 2), walk the buckets
// from the top until the mass crosses `target`, and sort only the crossing bucket. (A full sort per
// query made the profile of a 32K-token trace take seconds.)
int64_t tokens_for_mass(const std::vector<float>& p, double target, std::vector<float>& scratch) {
  std::array<double, 256> mass{};
  std::array<int64_t, 256> count{};
  for (float x : p) {
    const unsigned e = std::bit_cast<uint32_t>(x) >> 23;  // probabilities are >= 0: no sign bit
    mass[e] += x;
    ++count[e];
  }
  double acc = 0;
  int64_t taken = 0;
  for (int e = 255; e >= 0; --e) {
    if (count[size_t(e)] == 0) continue;
    if (acc + mass[size_t(e)] < target) {
      acc += mass[size_t(e)];
      taken += count[size_t(e)];
      continue;
    }
    scratch.clear();
    for (float x : p)
      if (std::bit_cast<uint32_t>(x) >> 23 == unsigned(e)) scratch.push_back(x);
    std::sort(scratch.begin(), scratch.end(), std::greater<>());
    for (float x : scratch) {
      if (acc >= target) break;
      acc += x;
      ++taken;
    }
    return taken;
  }
  return taken;  // rounding left the total just below target: every token
}

// Attention statistics of queries against keys 0..p, accumulated.
struct AttentionAccumulator {
  double sink = 0, sink_uniform = 0, recent = 0, entropy = 0, entropy_ratio = 0, mass90 = 0, focus = 0;
  int64_t count = 0;
  std::vector<float> probs, scratch;

  // `scores` holds q.k / sqrt(d) for keys 0..p (and anything after p, ignored).
  void add(const float* scores, int64_t p, const ProfileOptions& o) {
    const int64_t n = p + 1;
    const float mx = *std::max_element(scores, scores + n);
    probs.resize(size_t(n));
    double z = 0, zs = 0;  // sum of exp(s - mx) and of exp(s - mx) * (s - mx)
    for (int64_t t = 0; t < n; ++t) {
      const float x = scores[t] - mx, e = std::exp(x);
      probs[size_t(t)] = e;
      z += e;
      zs += double(e) * x;
    }
    // Entropy without a log per token: -sum p log p with log p = (s - mx) - log z.
    const double h = std::log(z) - zs / z;
    const float inv = float(1.0 / z);
    double s = 0, r = 0;
    for (int64_t t = 0; t < n; ++t) probs[size_t(t)] *= inv;
    for (int64_t t = 0; t < std::min<int64_t>(o.sink_tokens, n); ++t) s += probs[size_t(t)];
    for (int64_t t = std::max<int64_t>(0, n - o.recent_tokens); t < n; ++t) r += probs[size_t(t)];
    for (int64_t t = o.focus.first; t < std::min(o.focus.second, n); ++t) focus += probs[size_t(t)];
    sink += s;
    sink_uniform += double(std::min<int64_t>(o.sink_tokens, n)) / double(n);
    recent += r;
    entropy += h;
    entropy_ratio += n > 1 ? h / std::log(double(n)) : 0;
    mass90 += double(tokens_for_mass(probs, 0.9, scratch)) / double(n);
    ++count;
  }
};

// Adds, per distance, the cosines of the query pairs that many positions apart among the normalized
// query rows `Q` (rows s0..s1-1 of the trace; positions looked up, not assumed contiguous).
void add_query_cosines(const RowMatrix& Q, const std::vector<int64_t>& positions, int64_t s0, int64_t s1,
                       const std::vector<int>& distances, std::vector<double>& cos_sum, std::vector<int64_t>& cos_pairs) {
  for (size_t di = 0; di < distances.size(); ++di)
    for (int64_t i = s0, j = s0; i < s1; ++i) {
      const int64_t target = positions[size_t(i)] + distances[di];
      while (j < s1 && positions[size_t(j)] < target) ++j;
      if (j >= s1) break;
      if (positions[size_t(j)] != target) continue;
      cos_sum[di] += double(Q.row(i - s0).dot(Q.row(j - s0)));
      ++cos_pairs[di];
    }
}

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
  // Query rows of the decode range, for the cosine statistics: contiguous rows decode.front()..back().
  const int64_t s0 = decode.front(), s1 = decode.back() + 1;
  RowMatrix Q(s1 - s0, d);
  // The sampled queries of one KV head's whole query group, scored against its keys in one GEMM.
  RowMatrix Qs, S;
  for (int64_t ls : layers) {
    for (int kv = 0; kv < int(m.kv_heads.size()); ++kv) {
      std::vector<int> group;
      for (int qs = 0; qs < int(m.query_heads.size()); ++qs)
        if (trace.kv_slot_of_query(qs) == kv) group.push_back(qs);
      if (group.empty()) continue;
      trace.keys(int(ls), kv, 0, last_pos + 1, K.data());
      Qs.resize(Eigen::Index(group.size() * picked.size()), d);
      for (size_t g = 0; g < group.size(); ++g) {
        trace.queries(int(ls), group[g], s0, s1, Q.data());
        for (size_t i = 0; i < picked.size(); ++i) Qs.row(Eigen::Index(g * picked.size() + i)) = Q.row(picked[i] - s0);
        Q.rowwise().normalize();
        add_query_cosines(Q, tk.query_positions, s0, s1, o.distances, cos_sum, cos_pairs);
      }
      S.noalias() = (Qs * scale) * K.transpose();
      for (size_t g = 0; g < group.size(); ++g)
        for (size_t i = 0; i < picked.size(); ++i)
          acc.add(S.row(Eigen::Index(g * picked.size() + i)).data(), tk.query_positions[size_t(picked[i])], o);
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

namespace kvsim {

namespace {

// Mean cosine between the values of adjacent tokens 0..T-1 and the RMS of their elements.
void value_statistics(const TraceSource& trace, int ls, int kv, HeadProfile& h) {
  const int d = trace.head_dim();
  const int64_t T = trace.tokens_count();
  RowMatrix V(T, d);
  trace.values(ls, kv, 0, T, V.data());
  h.value_rms = std::sqrt(double(V.squaredNorm()) / double(V.size()));
  V.rowwise().normalize();
  double c = 0;
  for (int64_t t = 1; t < T; ++t) c += double(V.row(t).dot(V.row(t - 1)));
  h.value_cosine = T > 1 ? c / double(T - 1) : 0.0;
}

}  // namespace

std::vector<HeadProfile> profile_heads(const TraceSource& trace, const ProfileOptions& o,
                                       const std::vector<int>& layer_slots) {
  const TraceMeta& m = trace.meta();
  const TraceTokens& tk = trace.tokens();
  const int d = m.model.head_dim;
  const float scale = 1.0f / std::sqrt(float(d));
  // Decode queries as profile_trace takes them (prompt queries when there is no decode step).
  std::vector<int64_t> decode;
  for (int64_t s = 0; s < tk.steps(); ++s)
    if (tk.query_positions[size_t(s)] >= m.prompt_tokens) decode.push_back(s);
  if (decode.empty()) {
    decode.resize(size_t(tk.steps()));
    std::iota(decode.begin(), decode.end(), 0);
  }
  std::vector<int64_t> picked;
  for (int64_t i : evenly_spaced(int64_t(decode.size()), o.max_queries)) picked.push_back(decode[size_t(i)]);
  const int64_t last_pos = tk.query_positions[size_t(picked.back())];
  std::vector<int> layers = layer_slots;
  if (layers.empty())
    for (int i = 0; i < int(m.layers.size()); ++i) layers.push_back(i);

  std::vector<HeadProfile> out;
  RowMatrix K(last_pos + 1, d), Qs, S;
  const int64_t s0 = decode.front(), s1 = decode.back() + 1;
  RowMatrix Q(s1 - s0, d);
  for (int ls : layers)
    for (int kv = 0; kv < int(m.kv_heads.size()); ++kv) {
      HeadProfile h;
      h.layer_slot = ls;
      h.kv_slot = kv;
      std::vector<int> group;
      for (int qs = 0; qs < int(m.query_heads.size()); ++qs)
        if (trace.kv_slot_of_query(qs) == kv) group.push_back(qs);
      trace.keys(ls, kv, 0, last_pos + 1, K.data());
      Qs.resize(Eigen::Index(group.size() * picked.size()), d);
      std::vector<double> cos_sum(o.distances.size(), 0.0);
      std::vector<int64_t> cos_pairs(o.distances.size(), 0);
      for (size_t g = 0; g < group.size(); ++g) {
        trace.queries(ls, group[g], s0, s1, Q.data());
        for (size_t i = 0; i < picked.size(); ++i) Qs.row(Eigen::Index(g * picked.size() + i)) = Q.row(picked[i] - s0);
        Q.rowwise().normalize();
        add_query_cosines(Q, tk.query_positions, s0, s1, o.distances, cos_sum, cos_pairs);
      }
      for (size_t di = 0; di < o.distances.size(); ++di)
        h.cosine.push_back(cos_pairs[di] ? cos_sum[di] / double(cos_pairs[di]) : 0.0);
      AttentionAccumulator acc;
      S.noalias() = (Qs * scale) * K.transpose();
      for (size_t g = 0; g < group.size(); ++g)
        for (size_t i = 0; i < picked.size(); ++i)
          acc.add(S.row(Eigen::Index(g * picked.size() + i)).data(), tk.query_positions[size_t(picked[i])], o);
      if (acc.count > 0) {
        const double n = double(acc.count);
        h.sink_share = acc.sink / n;
        h.recent_share = acc.recent / n;
        h.entropy = acc.entropy / n;
        h.entropy_ratio = acc.entropy_ratio / n;
        h.mass90_fraction = acc.mass90 / n;
        h.focus_share = acc.focus / n;
      }
      if (trace.has_values()) value_statistics(trace, ls, kv, h);
      out.push_back(std::move(h));
    }
  return out;
}

}  // namespace kvsim
