// `kvsim trace fit`: the generator's knobs estimated from a real trace by simulated moments. The
// method, the classification rule and the scaling rule are in docs/synthetic-traces.md, "Fitting to a
// real trace"; the output (YAML, table, JSON) is in fit_output.cpp.
#include "traces/synthetic/fit.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <memory>
#include <numeric>
#include <thread>

#include "core/error.hpp"
#include "traces/format/profile.hpp"

namespace kvsim {

namespace {

// The statistics, in fit_statistic_names() order; the first kMatched are matched by the search (they
// depend on the knobs it moves), the value statistics are matched in closed form.
constexpr int kMatched = 7, kStats = 9;
using Stats = std::array<double, kStats>;

ProfileOptions fit_profile_options() {
  ProfileOptions o;  // sinks = first 4 tokens, recent = last 64, 32 decode queries per head: as trace info
  o.distances = {1, 8, 32};
  return o;
}

Stats stats_of(const HeadProfile& h) {
  return {h.sink_share, h.recent_share, h.entropy, h.mass90_fraction, h.cosine[0], h.cosine[1], h.cosine[2],
          h.value_rms, h.value_cosine};
}

// The classification rule: a head that puts more than a quarter of its decode attention outside the
// sinks (first 4 tokens) and the recent window (last 64) is a retrieval head (the generator's retrieval
// heads attend by content, anywhere); the rest are local heads. The generator's local heads keep over
// 90% on sinks and recent tokens; its retrieval heads about half, since the current topic is recent too.
bool is_retrieval(const HeadProfile& h) { return h.sink_share + h.recent_share < 0.75; }

Stats mean_of(const std::vector<Stats>& v) {
  Stats m{};
  for (const Stats& s : v)
    for (int i = 0; i < kStats; ++i) m[size_t(i)] += s[size_t(i)] / double(v.size());
  return m;
}

// Relative distance floors: below these a statistic's error counts as absolute (m90 is a few percent).
constexpr std::array<double, kMatched> kFloor = {0.05, 0.05, 0.5, 0.01, 0.05, 0.05, 0.05};

double distance(const Stats& sim, const Stats& real) {
  double d = 0;
  for (int i = 0; i < kMatched; ++i) {
    const double e = (sim[size_t(i)] - real[size_t(i)]) / std::max(std::abs(real[size_t(i)]), kFloor[size_t(i)]);
    d += e * e;
  }
  return d;
}

// A searched knob, in a coordinate where equal steps matter about equally: linear, ln(v), or
// ln(1 - v) for query_ar (so 0.9, 0.99, 0.999 are equal steps).
enum class Axis { linear, log, log_one_minus };
struct SearchKnob {
  const char* name;
  Axis axis;
  double lo, hi;          // in knob units
  double init;            // in knob units
  double step;            // in the axis coordinate
  double scan_lo, scan_hi;  // the screening box, in knob units: where real heads have been found
  bool length_sensitive;    // moved by a continued fit at another length (see search_group)
};
const SearchKnob kSearch[] = {
    {"sink_strength", Axis::linear, 0, 30, 8, 3, 0, 16, true},
    {"recency_strength", Axis::linear, 0, 30, 6, 3, 0, 16, true},
    {"recency_window", Axis::log, 1, 1024, 32, 1, 4, 256, true},
    {"topic_strength", Axis::linear, 0, 30, 4, 2, 0, 14, true},
    {"weak_factor", Axis::linear, 0, 1, 0.25, 0.2, 0, 0.8, false},
    {"retrieval_sink", Axis::linear, 0, 1, 0.25, 0.2, 0, 1, false},
    {"query_ar", Axis::log_one_minus, 0, 0.99999, 0.98, 1, 0.5, 0.995, false},
    {"query_noise", Axis::linear, 0, 5, 0.3, 0.3, 0, 1.5, false},
    {"query_wander", Axis::linear, 0, 5, 0.5, 0.3, 0, 2, false},
    {"key_noise", Axis::linear, 0, 5, 0.5, 0.3, 0, 2, false},
};
// Screening points before the coordinate search: a Halton sequence over the screening box, so the
// search starts in the best basin found rather than wherever the defaults are.
constexpr int kScreen = 32;
constexpr int kPrimes[] = {2, 3, 5, 7, 11, 13, 17, 19, 23, 29};

double halton(int index, int base) {
  double f = 1, r = 0;
  for (int i = index; i > 0; i /= base) {
    f /= base;
    r += f * (i % base);
  }
  return r;
}
constexpr int kKnobs = int(std::size(kSearch));
constexpr double kStay = 0.002;  // see search_group: about a 10% relative error of one statistic per step

double to_axis(const SearchKnob& k, double v) {
  if (k.axis == Axis::log) return std::log(v);
  if (k.axis == Axis::log_one_minus) return std::log(1.0 - v);
  return v;
}
double from_axis(const SearchKnob& k, double u) {
  double v = u;
  if (k.axis == Axis::log) v = std::exp(u);
  if (k.axis == Axis::log_one_minus) v = 1.0 - std::exp(u);
  return std::clamp(v, k.lo, k.hi);
}

// The target of one layer group: its heads' statistics by class.
struct GroupTarget {
  int first = 0, last = 0;  // model layers
  std::vector<Stats> local, retrieval;
  Stats local_mean{}, retrieval_mean{}, all_mean{};
};

// One simulated trace per candidate: the group's own layers of the fitted config itself (same seed,
// same layer and head indices, the same retrieval heads), so the search scores exactly the heads the
// fitted config will generate. Heads of one class differ a lot (each has its own random directions
// and key noise: the 4 sink keys' noise alone moves a head's sink share by tens of percent), so a
// stand-in sample of other heads would leave the fitted trace off by that much. 16 queries per head
// are plenty for the attention statistics, since heads vary far more than queries.
struct Simulator {
  SyntheticConfig base;  // the fitted config's skeleton: every group with its retrieval share only
  ProfileOptions po = [] {
    ProfileOptions o = fit_profile_options();
    o.max_queries = 16;
    return o;
  }();

  // Class means of the simulated heads: {local, retrieval}.
  std::pair<Stats, Stats> run(const SyntheticConfig& c) const {
    const SyntheticTrace tr(c);
    std::vector<Stats> loc, ret;
    for (const HeadProfile& h : profile_heads(tr, po))
      (tr.is_retrieval_head(tr.meta().layers[size_t(h.layer_slot)], tr.meta().kv_heads[size_t(h.kv_slot)]) ? ret : loc)
          .push_back(stats_of(h));
    return {loc.empty() ? Stats{} : mean_of(loc), ret.empty() ? Stats{} : mean_of(ret)};
  }
};

// The skeleton with group `g`'s searched knobs set to `u`, storing only that group's layers.
SyntheticConfig candidate(const SyntheticConfig& base, int g, const std::vector<int>& layers,
                          const std::array<double, kKnobs>& u) {
  SyntheticConfig c = base;
  c.store_layers = layers;
  for (int i = 0; i < kKnobs; ++i)
    c.layer_groups[size_t(g)].knobs.emplace_back(kSearch[i].name, from_axis(kSearch[i], u[size_t(i)]));
  return c;
}

// Coordinate descent from `u` (objective `f`) until `until` evaluations: per active coordinate, a step
// up, then down, doubling while it keeps helping; a coordinate whose two steps both fail halves its
// step, and rests once it is below `min_step`. `project` keeps a coordinate inside its bounds. Returns
// the objective at the end.
template <size_t N, class Objective, class Project>
double descend(const Objective& objective, std::array<double, N>& u, double f, std::array<double, N> step,
               const std::array<double, N>& min_step, const std::array<bool, N>& active, const Project& project,
               int until, const int& evaluations) {
  while (evaluations < until) {
    bool moving = false;
    for (size_t i = 0; i < N && evaluations < until; ++i) {
      if (!active[i] || step[i] < min_step[i]) continue;
      moving = true;
      bool improved = false;
      for (double dir : {1.0, -1.0}) {
        for (double len = step[i]; evaluations < until; len *= 2) {
          std::array<double, N> c = u;
          c[i] = project(i, u[i] + dir * len);
          if (c[i] == u[i]) break;  // at a bound
          const double fc = objective(c);
          if (fc >= f) break;
          f = fc;
          u = c;
          improved = true;
        }
        if (improved) break;
      }
      if (!improved) step[i] /= 2;
    }
    if (!moving) break;
  }
  return f;
}

// A group's distance from its target: each class weighs its share of the heads, at least a quarter,
// so a minority class still counts. `sim` is the simulated {local, retrieval} class means.
double group_distance(const GroupTarget& t, const std::pair<Stats, Stats>& sim) {
  const double n_loc = double(t.local.size()), n_ret = double(t.retrieval.size()), n = n_loc + n_ret;
  const double w_loc = n_loc > 0 ? std::max(n_loc / n, 0.25) : 0, w_ret = n_ret > 0 ? std::max(n_ret / n, 0.25) : 0;
  return (w_loc > 0 ? w_loc * distance(sim.first, t.local_mean) : 0) +
         (w_ret > 0 ? w_ret * distance(sim.second, t.retrieval_mean) : 0);
}

// The search of one group: screening, then coordinate descent (descend) from the best two points.
// Stops when every step is below 1/16 of its start or the budget is spent. Deterministic: same target,
// same simulator, same path.
GroupFit search_group(const GroupTarget& t, const Simulator& sim, int gi, const std::vector<int>& layers, int budget,
                      const GroupFit* start) {
  const double n_loc = double(t.local.size()), n_ret = double(t.retrieval.size()), n = n_loc + n_ret;
  GroupFit g;
  std::array<double, kKnobs> u{}, step{}, u0{};
  for (int i = 0; i < kKnobs; ++i) {
    u[size_t(i)] = to_axis(kSearch[i], kSearch[i].init);
    step[size_t(i)] = kSearch[i].step;
  }
  if (start) {  // continue from a fit of the same text at another length: no screening, finer steps
    for (int i = 0; i < kKnobs; ++i) {
      for (const auto& [k, v] : start->knobs)
        if (k == kSearch[i].name) u[size_t(i)] = to_axis(kSearch[i], std::clamp(v, kSearch[i].lo, kSearch[i].hi));
      step[size_t(i)] /= 4;
    }
  }
  u0 = u;
  auto objective = [&](const std::array<double, kKnobs>& c) {
    ++g.evaluations;
    double f = group_distance(t, sim.run(candidate(sim.base, gi, layers, c)));
    // A continued fit pays kStay per (initial step)^2 it moves a knob from where the other length left
    // it: a knob moves only where the statistics ask for it, so its path over the lengths is a trend
    // and not a walk between equally good settings (which a scaling rule would extrapolate).
    if (start)
      for (int i = 0; i < kKnobs; ++i) {
        const double z = (c[size_t(i)] - u0[size_t(i)]) / kSearch[i].step;
        f += kStay * z * z;
      }
    return f;
  };
  // Screening: the starting point and the Halton points, best first. The coordinate descent then runs
  // from the best two (up to `budget` simulations each) and keeps the better end: one basin found by
  // screening can be a trap (a topic-driven optimum for a head that is all sink, say).
  std::vector<std::pair<double, std::array<double, kKnobs>>> starts = {{objective(u), u}};
  for (int p = 1; p <= (start ? 0 : kScreen); ++p) {
    std::array<double, kKnobs> c{};
    for (int i = 0; i < kKnobs; ++i) {
      const double a = to_axis(kSearch[i], kSearch[i].scan_lo), b = to_axis(kSearch[i], kSearch[i].scan_hi);
      c[size_t(i)] = a + (b - a) * halton(p, kPrimes[i]);
    }
    starts.emplace_back(objective(c), c);
  }
  std::stable_sort(starts.begin(), starts.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  const int runs = std::min<int>(int(starts.size()), 2);
  // A continued fit (`start`) moves only the length-sensitive knobs.
  std::array<double, kKnobs> min_step{};
  std::array<bool, kKnobs> active{};
  for (int i = 0; i < kKnobs; ++i) {
    min_step[size_t(i)] = kSearch[i].step / 16;
    active[size_t(i)] = !start || kSearch[i].length_sensitive;
  }
  auto project = [](size_t i, double x) { return to_axis(kSearch[i], from_axis(kSearch[i], x)); };
  double best = std::numeric_limits<double>::infinity();
  for (int k = 0; k < runs; ++k) {
    const int until = g.evaluations + budget;
    std::array<double, kKnobs> at = starts[size_t(k)].second;
    const double f = descend(objective, at, starts[size_t(k)].first, step, min_step, active, project, until, g.evaluations);
    if (f < best) {
      best = f;
      u = at;
    }
  }
  for (int i = 0; i < kKnobs; ++i) g.knobs.emplace_back(kSearch[i].name, from_axis(kSearch[i], u[size_t(i)]));
  const auto [loc, ret] = sim.run(candidate(sim.base, gi, layers, u));
  for (int i = 0; i < kMatched; ++i) {
    const double fitted = (n_loc * loc[size_t(i)] + n_ret * ret[size_t(i)]) / n;
    g.residuals.push_back({fit_statistic_names()[size_t(i)], t.all_mean[size_t(i)], fitted});
  }
  return g;
}

void fail(const std::string& name, const std::string& field, const std::string& msg) {
  throw_input_error(name, 0, field, msg);
}

int64_t decode_count(const TraceSource& t) {
  int64_t n = 0;
  for (int64_t p : t.tokens().query_positions) n += p >= t.meta().prompt_tokens;
  return n;
}

// What a trace needs before it can be fitted; each failure names the file and the minimum.
void check_fittable(const TraceSource& t, const std::string& name) {
  const int64_t T = t.tokens_count(), P = t.meta().prompt_tokens, D = decode_count(t);
  if (T < kFitMinTokens)
    fail(name, "tokens", "the trace has " + std::to_string(T) + " tokens; a fit needs at least " +
                             std::to_string(kFitMinTokens) + " (4 sinks, a 64-token recent window and query "
                             "distances up to 32 must be a small part of the context)");
  if (P < 64) fail(name, "prompt_tokens", "value " + std::to_string(P) + " is below the 64 a fit needs");
  if (D < kFitMinDecodeQueries)
    fail(name, "query_positions", "the trace has " + std::to_string(D) + " decode queries (positions >= prompt_tokens " +
                                      std::to_string(P) + "); a fit needs at least " +
                                      std::to_string(kFitMinDecodeQueries) +
                                      " so that query pairs 32 steps apart exist (capture with --gen 64)");
  const auto& q = t.tokens().query_positions;
  for (size_t i = 0; i < q.size(); ++i)
    if (q[i] >= T || (i > 0 && q[i] <= q[i - 1]))
      fail(name, "query_positions[" + std::to_string(i) + "]",
           "value " + std::to_string(q[i]) + " is not causal: positions must increase and stay below T = " + std::to_string(T));
}

// The per-head statistics of the real trace; a non-finite one means NaN or Inf in that head's data.
std::vector<HeadProfile> real_heads(const TraceSource& t, const std::string& name) {
  std::vector<HeadProfile> heads = profile_heads(t, fit_profile_options());
  for (const HeadProfile& h : heads)
    for (double v : stats_of(h))
      if (!std::isfinite(v))
        fail(name, "layer " + std::to_string(t.meta().layers[size_t(h.layer_slot)]) + ", KV head " +
                       std::to_string(t.meta().kv_heads[size_t(h.kv_slot)]),
             "its keys, queries or values hold NaN or Inf; a fit needs finite data");
  return heads;
}

// Contiguous groups of stored layers with the least within-group spread of the per-layer statistics
// (each standardized across layers; the retrieval fraction is one of them): exact dynamic programming.
// Returns the first stored-layer slot of each group.
std::vector<int> choose_groups(const std::vector<HeadProfile>& heads, int layers, int groups) {
  constexpr int F = kMatched + 1;
  std::vector<std::array<double, F>> f(static_cast<size_t>(layers));
  std::vector<int> count(static_cast<size_t>(layers), 0);
  for (const HeadProfile& h : heads) {
    const Stats s = stats_of(h);
    auto& r = f[size_t(h.layer_slot)];
    for (int i = 0; i < kMatched; ++i) r[size_t(i)] += s[size_t(i)];
    r[kMatched] += is_retrieval(h) ? 1 : 0;
    ++count[size_t(h.layer_slot)];
  }
  for (int l = 0; l < layers; ++l)
    for (double& x : f[size_t(l)]) x /= std::max(1, count[size_t(l)]);
  for (int i = 0; i < F; ++i) {
    double mean = 0, var = 0;
    for (const auto& r : f) mean += r[size_t(i)] / layers;
    for (const auto& r : f) var += (r[size_t(i)] - mean) * (r[size_t(i)] - mean) / layers;
    const double sd = var > 0 ? std::sqrt(var) : 1.0;
    for (auto& r : f) r[size_t(i)] = (r[size_t(i)] - mean) / sd;
  }
  auto cost = [&](int a, int b) {  // spread of layers a..b (inclusive) around their mean
    std::array<double, F> m{};
    for (int l = a; l <= b; ++l)
      for (int i = 0; i < F; ++i) m[size_t(i)] += f[size_t(l)][size_t(i)] / (b - a + 1);
    double c = 0;
    for (int l = a; l <= b; ++l)
      for (int i = 0; i < F; ++i) c += (f[size_t(l)][size_t(i)] - m[size_t(i)]) * (f[size_t(l)][size_t(i)] - m[size_t(i)]);
    return c;
  };
  const int G = std::clamp(groups, 1, layers);
  const double inf = std::numeric_limits<double>::infinity();
  // best[g][b]: layers 0..b in g + 1 groups; from[g][b]: where the last of them starts.
  std::vector<std::vector<double>> best(size_t(G), std::vector<double>(size_t(layers), inf));
  std::vector<std::vector<int>> from(size_t(G), std::vector<int>(size_t(layers), 0));
  for (int b = 0; b < layers; ++b) best[0][size_t(b)] = cost(0, b);
  for (int g = 1; g < G; ++g)
    for (int b = g; b < layers; ++b)
      for (int a = g; a <= b; ++a) {
        const double c = best[size_t(g - 1)][size_t(a - 1)] + cost(a, b);
        if (c < best[size_t(g)][size_t(b)]) {
          best[size_t(g)][size_t(b)] = c;
          from[size_t(g)][size_t(b)] = a;
        }
      }
  std::vector<int> starts(static_cast<size_t>(G), 0);
  for (int g = G - 1, b = layers - 1; g > 0; --g) {
    starts[size_t(g)] = from[size_t(g)][size_t(b)];
    b = starts[size_t(g)] - 1;
  }
  return starts;
}

// The generator config every simulation starts from: the real trace's heads, length and text rhythm.
SyntheticConfig simulation_base(const TraceSource& t, const std::string& name, uint64_t seed) {
  const TraceMeta& m = t.meta();
  SyntheticConfig c;
  c.model_name = m.model.name.empty() ? "fitted" : m.model.name;
  c.layers = 2;  // the probe below; fit_trace sets the model's
  c.heads = m.model.heads;
  c.kv_heads = m.model.kv_heads;
  c.head_dim = m.model.head_dim;
  c.rope_theta = m.model.rope_theta;
  c.dtype = DType::fp32;
  c.values = false;
  c.seed = seed;
  // Sinks without a topic: with it, the sink share of a fitted config jumped by ~0.3 whenever the decode's
  // topic was the first sentence's (1 in `topics` seeds or lengths; docs/synthetic-traces.md).
  c.sink_topic = false;
  c.prompt_tokens = m.prompt_tokens;
  c.generated_tokens = t.tokens_count() - m.prompt_tokens;
  c.obs_window = std::clamp<int64_t>(t.steps_count() - decode_count(t), 1, m.prompt_tokens);
  if (!m.sentence_starts.empty())
    c.mean_sentence_tokens = std::clamp(double(t.tokens_count()) / double(m.sentence_starts.size()), 2.0, 1000.0);
  c.mean_sentence_tokens = std::round(c.mean_sentence_tokens * 100) / 100;  // as the YAML will hold it
  try {
    // The recency pairs are fixed for every candidate and group, as the widest window searched makes
    // them: otherwise a group's window would change the recency pairs of every other group.
    SyntheticConfig widest = c;
    widest.recency_window = 1024;
    const SyntheticTrace probe(widest);
    c.recency_pairs = probe.recency_pairs();
    validate_synthetic_config(c, name);
  } catch (const InputError& e) {
    fail(name, "model", std::string("the generator cannot make this trace's shape: ") + e.what());
  }
  return c;
}

// Values in closed form: a token's value is value_noise x noise + value_topic x its topic's direction,
// so the mean square element is noise^2 + topic^2 and adjacent tokens (almost always one topic) have
// cosine topic^2 / (noise^2 + topic^2).
void fit_values(const std::vector<const HeadProfile*>& heads, GroupFit& g) {
  double ms = 0, cs = 0;
  for (const HeadProfile* h : heads) {
    ms += h->value_rms * h->value_rms / double(heads.size());
    cs += h->value_cosine / double(heads.size());
  }
  const double c = std::clamp(cs, 0.0, 1.0), r = std::sqrt(ms);
  g.knobs.emplace_back("value_noise", std::min(100.0, r * std::sqrt(1 - c)));
  g.knobs.emplace_back("value_topic", std::min(100.0, r * std::sqrt(c)));
}

}  // namespace

double FitStat::relative_error() const {
  if (real == 0) return fitted == 0 ? 0.0 : std::numeric_limits<double>::infinity();
  return (fitted - real) / std::abs(real);
}

const std::vector<std::string>& fit_statistic_names() {
  static const std::vector<std::string> names = {"sink_share", "recent_share", "entropy", "mass90",
                                                 "cos1",       "cos8",         "cos32",   "value_rms",
                                                 "value_cos"};
  return names;
}

namespace {

// Group g holds stored layer slots starts[g] .. starts[g + 1] - 1: its model layers, its real heads
// (`members`) and their statistics by class.
void build_targets(const TraceMeta& m, const std::vector<HeadProfile>& heads, const std::vector<int>& starts,
                   std::vector<GroupTarget>& targets, std::vector<std::vector<const HeadProfile*>>& members,
                   std::vector<std::vector<int>>& layers) {
  const int stored = int(m.layers.size());
  targets.assign(starts.size(), GroupTarget{});
  members.assign(starts.size(), {});
  layers.assign(starts.size(), {});
  for (size_t g = 0; g < starts.size(); ++g) {
    const int a = starts[g], b = g + 1 < starts.size() ? starts[g + 1] - 1 : stored - 1;
    GroupTarget& t = targets[g];
    t.first = g == 0 ? 0 : m.layers[size_t(a)];
    t.last = g + 1 < starts.size() ? m.layers[size_t(starts[g + 1])] - 1 : m.model.layers - 1;
    for (int l = a; l <= b; ++l) layers[g].push_back(m.layers[size_t(l)]);
    std::vector<Stats> all;
    for (const HeadProfile& h : heads)
      if (h.layer_slot >= a && h.layer_slot <= b) {
        members[g].push_back(&h);
        all.push_back(stats_of(h));
        (is_retrieval(h) ? t.retrieval : t.local).push_back(all.back());
      }
    t.all_mean = mean_of(all);
    if (!t.local.empty()) t.local_mean = mean_of(t.local);
    if (!t.retrieval.empty()) t.retrieval_mean = mean_of(t.retrieval);
  }
}

// Stored layer slot where each group starts: chosen, or from fixed [first, last] model-layer groups.
std::vector<int> group_starts(const TraceMeta& m, const std::vector<HeadProfile>& heads, int want,
                              const std::vector<std::pair<int, int>>& groups) {
  const int stored = int(m.layers.size());
  if (groups.empty()) return choose_groups(heads, stored, want);
  std::vector<int> starts;
  for (const auto& [first, last] : groups) {
    int s = 0;
    while (s < stored && m.layers[size_t(s)] < first) ++s;
    if (s < stored && m.layers[size_t(s)] <= last && (starts.empty() || starts.back() != s)) starts.push_back(s);
  }
  if (starts.empty() || starts.front() != 0) starts.insert(starts.begin(), 0);
  return starts;
}

// What a search at one length needs: the real trace's heads, its groups and their targets, and the
// fitted config's skeleton (the model's layers, every group with its classified retrieval share, or
// `like`'s when given: a fit at another length keeps the same retrieval heads, as its scaled config
// generated there would, since which heads are retrieval heads moves a group's statistics far more than
// a few heads' worth of share).
struct Prepared {
  std::vector<HeadProfile> heads;
  std::vector<int> starts;
  std::vector<GroupTarget> targets;
  std::vector<std::vector<const HeadProfile*>> members;  // point into `heads`
  std::vector<std::vector<int>> layers;
  SyntheticConfig skeleton;
};

std::unique_ptr<Prepared> prepare(const TraceSource& real, const std::string& name, const FitOptions& o,
                                  const std::vector<std::pair<int, int>>& groups, const TraceFitResult* like) {
  check_fittable(real, name);
  const TraceMeta& m = real.meta();
  auto p = std::make_unique<Prepared>();  // on the heap: `members` points into `heads`
  p->heads = real_heads(real, name);
  p->starts = group_starts(m, p->heads, o.groups, groups);
  build_targets(m, p->heads, p->starts, p->targets, p->members, p->layers);
  SyntheticConfig& cfg = p->skeleton;
  cfg = simulation_base(real, name, o.seed);
  cfg.layers = m.model.layers;
  if (int(m.kv_heads.size()) != m.model.kv_heads) cfg.store_kv_heads = m.kv_heads;
  for (size_t g = 0; g < p->starts.size(); ++g) {
    const GroupTarget& t = p->targets[g];
    double share = double(t.retrieval.size()) / double(p->members[g].size());
    if (like && g < like->groups.size())
      for (const auto& [k, v] : like->groups[g].knobs)
        if (k == "retrieval_heads") share = v;
    cfg.layer_groups.push_back(LayerGroup{t.first, t.last, {{"retrieval_heads", share}}});
  }
  return p;
}

}  // namespace

TraceFitResult fit_trace(const TraceSource& real, const std::string& name, const FitOptions& o,
                         const std::vector<std::pair<int, int>>& groups, const TraceFitResult* start) {
  const std::unique_ptr<Prepared> prep = prepare(real, name, o, groups, start);
  const TraceMeta& m = real.meta();
  const std::vector<HeadProfile>& heads = prep->heads;
  const std::vector<int>& starts = prep->starts;
  const std::vector<GroupTarget>& targets = prep->targets;
  const auto& members = prep->members;
  const auto& layers = prep->layers;
  SyntheticConfig cfg = prep->skeleton;
  TraceFitResult r;
  r.source = name;
  r.tokens = real.tokens_count();
  r.prompt_tokens = m.prompt_tokens;
  r.generated_tokens = r.tokens - m.prompt_tokens;
  r.decode_queries = decode_count(real);
  r.groups.resize(starts.size());
  for (size_t g = 0; g < starts.size(); ++g) {
    GroupFit& gf = r.groups[g];
    gf.first = targets[g].first;
    gf.last = targets[g].last;
    gf.heads = int(members[g].size());
    gf.retrieval = int(targets[g].retrieval.size());
  }
  const Simulator sim{cfg};
  // Groups are independent searches: two threads take every other group (the machine has 2 cores);
  // each search is deterministic, so the result does not depend on the threads.
  auto work = [&](size_t first) {
    for (size_t g = first; g < starts.size(); g += 2) {
      const GroupFit* from = start && g < start->groups.size() ? &start->groups[g] : nullptr;
      GroupFit found = search_group(targets[g], sim, int(g), layers[g], o.max_evaluations, from);
      r.groups[g].knobs = std::move(found.knobs);
      r.groups[g].residuals = std::move(found.residuals);
      r.groups[g].evaluations = found.evaluations;
    }
  };
  std::thread helper(work, 1);
  work(0);
  helper.join();
  cfg.values = real.has_values();
  cfg.dtype = real.storage_dtype() == DType::fp8 ? DType::bf16 : real.storage_dtype();
  if (int(m.layers.size()) != m.model.layers) cfg.store_layers = m.layers;
  for (size_t g = 0; g < starts.size(); ++g) {
    GroupFit& gf = r.groups[g];
    gf.knobs.insert(gf.knobs.begin(), cfg.layer_groups[g].knobs.front());
    if (real.has_values()) fit_values(members[g], gf);
    cfg.layer_groups[g].knobs = gf.knobs;
  }
  r.config = cfg;
  // The whole fitted trace against the real one, profiled alike.
  std::vector<Stats> real_all, fit_all;
  for (const HeadProfile& h : heads) real_all.push_back(stats_of(h));
  const SyntheticTrace fitted(cfg);
  for (const HeadProfile& h : profile_heads(fitted, fit_profile_options())) fit_all.push_back(stats_of(h));
  const Stats rm = mean_of(real_all), fm = mean_of(fit_all);
  for (int i = 0; i < (real.has_values() ? kStats : kMatched); ++i)
    r.residuals.push_back({fit_statistic_names()[size_t(i)], rm[size_t(i)], fm[size_t(i)]});
  return r;
}

namespace {

// The length-dependent knobs of a multi-length fit: the logit strengths. A boost of s nats on k tokens
// against T - k others gives them the share k e^s / (k e^s + T - k), so holding a share as the context
// grows takes s growing like ln T; every other knob is one setting at every length.
constexpr std::array<const char*, 3> kScaled = {"sink_strength", "recency_strength", "topic_strength"};
using Slopes = std::array<double, kScaled.size()>;
constexpr double kSlopeStep = 0.5, kSlopeMax = 8;  // nats per unit of ln(tokens)

// A group's searched knobs of the reference fit, the strengths moved by slope x `x` (= ln(T / reference)),
// clamped as apply_scaling clamps them.
std::vector<std::pair<std::string, double>> knobs_at(const std::vector<std::pair<std::string, double>>& ref,
                                                     const Slopes& b, double x) {
  std::vector<std::pair<std::string, double>> out;
  for (auto [k, v] : ref) {
    if (std::none_of(std::begin(kSearch), std::end(kSearch), [&](const SearchKnob& s) { return k == s.name; })) continue;
    for (size_t j = 0; j < kScaled.size(); ++j)
      if (k == kScaled[j])
        for (const GroupKnob& gk : group_knobs())
          if (k == gk.name) v = std::clamp(v + b[j] * x, gk.range.lo, gk.range.hi);
    out.emplace_back(k, v);
  }
  return out;
}

// The slopes of group g: one set of knobs (the reference fit's) at every length, the strengths linear in
// ln(tokens), the slopes searched to match the shorter lengths' targets together (coordinate descent
// from 0, `budget` evaluations). At the reference length the slopes change nothing, so its fit stands.
Slopes fit_slopes(size_t g, const GroupFit& ref, const std::vector<const Prepared*>& lengths, const std::vector<double>& x,
                  int budget) {
  int evaluations = 0;
  auto objective = [&](const Slopes& b) {
    ++evaluations;
    double f = 0;
    for (size_t k = 0; k < lengths.size(); ++k) {
      const Prepared& p = *lengths[k];
      SyntheticConfig c = p.skeleton;
      c.store_layers = p.layers[g];
      for (auto& kv : knobs_at(ref.knobs, b, x[k])) c.layer_groups[g].knobs.push_back(kv);
      f += group_distance(p.targets[g], Simulator{p.skeleton}.run(c));
    }
    return f;
  };
  Slopes b{}, step{}, min_step{};
  std::array<bool, kScaled.size()> active{};
  step.fill(kSlopeStep);
  min_step.fill(kSlopeStep / 16);
  active.fill(true);
  auto project = [](size_t, double v) { return std::clamp(v, -kSlopeMax, kSlopeMax); };
  descend(objective, b, objective(b), step, min_step, active, project, budget, evaluations);
  return b;
}

}  // namespace

std::vector<TraceFitResult> fit_traces(const std::vector<const TraceSource*>& real, const std::vector<std::string>& names,
                                       const FitOptions& o) {
  std::vector<size_t> order(real.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return real[a]->tokens_count() < real[b]->tokens_count(); });
  const TraceMeta& ref = real[order.back()]->meta();
  for (size_t i : order) {
    const TraceMeta& m = real[i]->meta();
    if (m.model.layers != ref.model.layers || m.model.heads != ref.model.heads || m.model.kv_heads != ref.model.kv_heads ||
        m.model.head_dim != ref.model.head_dim || m.model.rope_theta != ref.model.rope_theta || m.layers != ref.layers ||
        m.kv_heads != ref.kv_heads)
      fail(names[i], "model", "its model shape or stored layers/heads differ from " + names[order.back()] +
                                  "'s; the lengths of one fit must come from one model and one capture setup");
    if (i != order.back() && real[i]->tokens_count() == real[order.back()]->tokens_count())
      fail(names[i], "tokens", "it has as many tokens (" + std::to_string(real[i]->tokens_count()) + ") as " +
                                   names[order.back()] + "; give lengths that differ");
  }
  // The longest length is fitted in full; groups are chosen on it and kept for every length.
  std::vector<TraceFitResult> fits(real.size());
  fits.back() = fit_trace(*real[order.back()], names[order.back()], o);
  const bool needle = o.needle != std::pair<int64_t, int64_t>{0, 0};
  if (fits.size() < 2) {
    if (needle) fit_needle(fits.back(), *real[order.back()], names[order.back()], o.needle);
    return fits;
  }
  std::vector<std::pair<int, int>> groups;
  for (const GroupFit& g : fits.back().groups) groups.emplace_back(g.first, g.last);
  // The shorter lengths decide only the strengths' slopes: fitted separately, each length's knobs would
  // scatter between equally good settings, and a rule drawn through scatter extrapolates it.
  std::vector<std::unique_ptr<Prepared>> preps;
  std::vector<const Prepared*> lengths;
  std::vector<double> x;
  for (size_t k = 0; k + 1 < order.size(); ++k) {
    preps.push_back(prepare(*real[order[k]], names[order[k]], o, groups, &fits.back()));
    lengths.push_back(preps.back().get());
    x.push_back(std::log(double(real[order[k]]->tokens_count()) / double(fits.back().tokens)));
  }
  std::vector<Slopes> slopes(groups.size());
  auto work = [&](size_t first) {  // groups are independent: two threads, as in fit_trace
    for (size_t g = first; g < groups.size(); g += 2)
      slopes[g] = fit_slopes(g, fits.back().groups[g], lengths, x, std::max(1, o.max_evaluations / 4));
  };
  std::thread helper(work, 1);
  work(0);
  helper.join();
  // Each shorter length's result is the rule's config there, scored against that length's real trace
  // (no search: a continued fit with no evaluations to spend).
  FitOptions score = o;
  score.max_evaluations = 0;
  for (size_t k = 0; k + 1 < order.size(); ++k) {
    TraceFitResult at = fits.back();
    for (size_t g = 0; g < groups.size(); ++g) at.groups[g].knobs = knobs_at(fits.back().groups[g].knobs, slopes[g], x[k]);
    fits[k] = fit_trace(*real[order[k]], names[order[k]], score, groups, &at);
  }
  SyntheticConfig& cfg = fits.back().config;
  cfg.scaling_reference_tokens = fits.back().tokens;
  std::vector<int64_t> tokens;
  for (const TraceFitResult& f : fits) tokens.push_back(f.tokens);
  // A rule per group knob, with each length's value as evidence; only the strengths have a slope.
  for (size_t g = 0; g < cfg.layer_groups.size(); ++g)
    for (const auto& [knob, v] : cfg.layer_groups[g].knobs) {
      ScalingRule r{int(g), knob, 0, tokens, {}};
      for (size_t j = 0; j < kScaled.size(); ++j)
        if (knob == kScaled[j]) r.slope = slopes[g][j];
      for (const TraceFitResult& f : fits)
        for (const auto& [k2, v2] : f.config.layer_groups[g].knobs)
          if (k2 == knob) r.values.push_back(v2);
      if (r.values.size() == fits.size()) cfg.scaling.push_back(std::move(r));
    }
  // The needle last: its strength is fitted on the finished config (scaling rules change nothing at the
  // longest length, where it is fitted).
  if (needle) fit_needle(fits.back(), *real[order.back()], names[order.back()], o.needle);
  return fits;
}

}  // namespace kvsim
