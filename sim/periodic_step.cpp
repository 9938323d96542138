#include "sim/periodic_step.hpp"

#include <vector>

#include "sim/event_loop.hpp"

namespace kvsim::sim {

PeriodicCounters& periodic_counters() {
  static PeriodicCounters c;
  return c;
}

struct StepGraph::Periodic {
  using State = Loop::State;
  const StepGraph& g;
  const std::vector<int>& layer;
  const Adjacency& adj;
  size_t first = 0, per = 0;  // layer l is phases [first + l * per, first + (l + 1) * per)
  int layers = 0;
  int generic = 0, last_generic = 0;  // layers generic .. last_generic are alike (laid_out)

  size_t at(int l, size_t j) const { return first + size_t(l) * per + j; }

  // A target of an out-edge, relative to its source's layer `l`: (layer offset, index in the layer),
  // or (a marker, the phase itself) outside the layers.
  std::pair<int64_t, size_t> relative(size_t target, int l) const {
    const int lt = layer[target];
    if (lt < 0) return {INT64_MIN, target};
    return {int64_t(lt) - l, target - at(lt, 0)};
  }

  // True when the layers are contiguous and equally long, and layers `generic` .. `last_generic` each
  // repeat the one before: the same phases, in-degrees and out-edges (in order: the order the loop
  // releases phases in). The first layers (edges from the phases before them, or from layers that do
  // not exist) and the last (edges to the phases after them: L-1 in a decode step) may differ: a
  // period starts only at or past `generic`, and no copied period reaches past `last_generic`.
  bool laid_out(int extra) {
    const size_t n = g.size_;
    if (layer.size() != n) return false;
    size_t count = 0;
    int hi = -1;
    for (size_t i = 0; i < n; ++i)
      if (layer[i] >= 0) {
        if (hi < 0) first = i;
        hi = std::max(hi, layer[i]);
        ++count;
      }
    layers = hi + 1;
    if (layers < 4 || count % size_t(layers) != 0) return false;
    per = count / size_t(layers);
    for (int l = 0; l < layers; ++l)
      for (size_t j = 0; j < per; ++j)
        if (layer[at(l, j)] != l) return false;
    last_generic = layers - 1;
    while (last_generic > 0 && !repeats(last_generic - 1)) --last_generic;
    generic = last_generic;
    while (generic > 0 && repeats(generic - 1)) --generic;
    // Room for two boundaries and a period to copy; a graph standing for a longer one copies its periods
    // into the layers it stands for (the jump may copy none here), so two boundaries suffice.
    return last_generic - generic >= (extra > 0 ? 2 : 3);
  }

  // Layer l + 1 is layer l again.
  bool repeats(int l) const {
    for (size_t j = 0; j < per; ++j) {
      const size_t a = at(l, j), b = at(l + 1, j);
      if (g.proto_[a] != g.proto_[b]) {  // repeats of one phase are equal without a look
        const SimPhase &pa = g.phase(a), &pb = g.phase(b);
        if (pa.latency != pb.latency || pa.min_seconds != pb.min_seconds || pa.amount != pb.amount) return false;
      }
      if (adj.in_start[a + 1] - adj.in_start[a] != adj.in_start[b + 1] - adj.in_start[b]) return false;
      if (adj.out_start[a + 1] - adj.out_start[a] != adj.out_start[b + 1] - adj.out_start[b]) return false;
      for (uint32_t ea = adj.out_start[a], eb = adj.out_start[b]; ea < adj.out_start[a + 1]; ++ea, ++eb)
        if (relative(adj.out[ea], l) != relative(adj.out[eb], l + 1)) return false;
    }
    return true;
  }

  // The loop's state at layer `l`'s boundary, relative to l: the lowest layer not finished and the
  // highest touched (as offsets), every phase of the layers between (state, predecessors left,
  // remaining), the running phases in order, and the phases outside the layers; into `out`, which is
  // left empty when the boundary cannot start a period (a phase outside the layers is running).
  void snapshot(const Loop& s, int l, std::vector<double>& out) const {
    out.clear();
    out.reserve(2 + 3 * per * 3 + 2 * g.size_);
    int lo = 0;
    while (lo < layers && s.done_in_layer[size_t(lo)] == per) ++lo;
    const int hi = std::max(s.touched_hi, l);
    out.push_back(lo - l);
    out.push_back(hi - l);
    for (int k = lo; k <= hi && k < layers; ++k)
      for (size_t j = 0; j < per; ++j) {
        const size_t i = at(k, j);
        const bool running = s.state[i] == State::delay || s.state[i] == State::flow;
        out.push_back(double(s.state[i]));
        out.push_back(double(s.pending[i]));
        out.push_back(running ? s.remaining[i] : 0.0);
      }
    for (size_t i : s.active) {
      if (layer[i] < 0) {
        out.clear();
        return;
      }
      out.push_back(layer[i] - l);
      out.push_back(double(i - at(layer[i], 0)));
    }
    // The phases outside the layers: before the first and after the last (the layers are contiguous).
    auto outside = [&](size_t from, size_t to) {
      for (size_t i = from; i < to; ++i) {
        out.push_back(double(s.state[i]));
        out.push_back(double(s.pending[i]));
      }
    };
    outside(0, first);
    outside(at(layers, 0), layer.size());
  }

  // Layer l1's boundary repeats layer l1-1's: copy the period's events (s.log, since that boundary,
  // `period` seconds long) to the next k periods and shift the state by k layers.
  // With `extra` layers more in the longer graph the loop jumps k + extra periods there: the phases
  // from layer lo + k on (returned) stand for theirs `extra` layers later. Every event of the period
  // lands, m periods later, m layers further on: below lo + k on the phase itself (m <= k), from
  // lo + k on on the phase that stands for it (m <= k + extra). Returns -1, having changed nothing,
  // when a phase from lo + k on would stand for one that has events before the period (few extra
  // layers): the copies could not give all its events.
  int jump(Loop& s, int k, double period, size_t done_in_period, int extra) const {
    const size_t shift = size_t(k) * per;
    int lo = 0;
    while (s.done_in_layer[size_t(lo)] == per) ++lo;
    const int hi = s.touched_hi;
    if (extra > 0 && lo + k + extra <= hi) return -1;
    for (size_t e : s.log) {
      const size_t i = e / 2;
      const bool fin = e % 2;
      const int l0 = layer[i];
      const size_t j = i - at(l0, 0);
      std::vector<double>& times = fin ? s.t.finish : s.t.start;
      const double t0 = times[i];
      for (int m = 1; m <= k && l0 + m < lo + k; ++m) times[at(l0 + m, j)] = t0 + m * period;
      for (int l = lo + k; l <= hi + k; ++l) {
        const int m = l + extra - l0;
        if (m >= 1 && m <= k + extra) times[at(l, j)] = t0 + m * period;
      }
    }
    for (int l = hi + k; l >= lo; --l) {
      const bool copied = l - k >= lo;
      s.done_in_layer[size_t(l)] = copied ? s.done_in_layer[size_t(l - k)] : per;
      for (size_t j = 0; j < per; ++j) {
        const size_t i = at(l, j);
        s.state[i] = copied ? s.state[i - shift] : State::done;
        s.pending[i] = copied ? s.pending[i - shift] : 0;
        s.remaining[i] = copied ? s.remaining[i - shift] : 0.0;
      }
    }
    for (size_t& i : s.active) i += shift;
    s.done += size_t(k) * done_in_period;
    s.touched_hi += k;
    s.now += (k + extra) * period;
    s.log.clear();
    return lo + k;
  }

  // Per resource, what layer `generic`'s phases move (one layer of the longer graph's extra ones).
  std::vector<double> layer_amount() const {
    std::vector<double> moved(g.resources_, 0.0);
    for (size_t j = 0; j < per; ++j)
      for (size_t r = 0; r < g.resources_; ++r) moved[r] += g.phase(at(generic, j)).amount[r];
    return moved;
  }
};

SimTiming StepGraph::run_periodic(const std::vector<double>& cap, const std::vector<Coupling>& couplings,
                                  const std::vector<int>& layer, PeriodicReport* report, int extra,
                                  Detail detail) const {
  PeriodicCounters& counters = periodic_counters();
  Loop s(*this, cap, couplings);
  Periodic p{*this, layer, s.adj};
  if (!p.laid_out(extra)) {
    ++counters.no_layer_structure;
    if (report) *report = {PeriodicOutcome::no_layer_structure, 0};
    s.init();
    while (s.done < s.n) s.step();
    summarize(s.t, cap, s.adj, detail);
    return std::move(s.t);
  }
  s.layer = &layer;
  s.done_in_layer.assign(size_t(p.layers), 0);
  s.init();
  std::vector<double> before, now;
  int before_layer = -1;  // the layer whose boundary `before` holds; -1: none usable
  double before_time = 0;
  size_t before_done = 0;
  bool jumped = false, extrapolated = false;
  int shifted_from = 0;
  int next = 0;  // the next layer whose boundary to take
  while (s.done < s.n) {
    if (!jumped && next < p.layers && s.state[p.at(next, 0)] != Loop::State::waiting) {
      // A boundary only when the next layer has not started too: two boundaries in one event are not
      // the same moment of the period.
      const bool alone = next + 1 >= p.layers || s.state[p.at(next + 1, 0)] == Loop::State::waiting;
      if (alone) p.snapshot(s, next, now);
      else now.clear();
      // The period starts past the layers that differ: everything before layer `generic` is done.
      const bool lo_ok = !now.empty() && next - 1 + int(now[0]) >= p.generic;
      if (lo_ok && before_layer == next - 1 && now == before) {
        // A period from boundary b reaches layer b + 1 + now[1]; no copied one may reach past last_generic.
        const int target = p.last_generic - int(now[1]);
        if (target - next >= (extra > 0 ? 0 : 1)) {
          shifted_from = p.jump(s, target - next, s.now - before_time, s.done - before_done, extra);
          extrapolated = shifted_from >= 0;
        }
        jumped = true;
      } else {
        before.swap(now);
        before_layer = before.empty() ? -1 : next;
        before_time = s.now;
        before_done = s.done;
        s.log.clear();
      }
      ++next;
      continue;  // the jump may have finished nothing yet; re-check the loop's condition
    }
    s.step();
  }
  ++(extrapolated ? counters.extrapolated : counters.no_period);
  if (report) *report = {extrapolated ? PeriodicOutcome::extrapolated : PeriodicOutcome::no_period, shifted_from};
  if (extrapolated && extra > 0 && detail == Detail::full) {
    // The longer graph moves `extra` layers' amounts more over its makespan.
    std::vector<double> more = p.layer_amount();
    for (double& a : more) a *= extra;
    summarize(s.t, cap, s.adj, detail, &more);
  } else {
    summarize(s.t, cap, s.adj, detail);
  }
  return std::move(s.t);
}

}  // namespace kvsim::sim
