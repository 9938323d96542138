// The event loop of StepGraph::run as a class, private to sim/: StepGraph::run (the oracle) drives it
// to the end, and StepGraph::run_periodic (periodic_step.cpp) stops it at layer boundaries to compare
// and shift its state. One loop for both, so that the fast path does the oracle's arithmetic in the
// oracle's order: up to the jump the two are bitwise equal.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <vector>

#include "sim/fair_share.hpp"
#include "sim/step_graph.hpp"

namespace kvsim::sim {

struct StepGraph::Loop {
  enum class State : uint8_t { waiting, delay, flow, done };

  const StepGraph& g;
  const std::vector<double>& cap;
  const std::vector<Coupling>& couplings;
  size_t n;
  Adjacency own;         // the edges as rows, made here when the graph was not prepared
  const Adjacency& adj;  // own, or the graph's (StepGraph::prepare)
  // The per-run arrays live in a per-thread workspace (Workspace below), so that a planner timing
  // millions of steps allocates nothing per step but the result it returns.
  struct Workspace {
    std::vector<double> solo, remaining;
    std::vector<SparseFlow> flow;  // per phase: its nonzero use per second at full speed (amount / solo)
    std::vector<uint8_t> flow_resource;
    std::vector<double> flow_use;
    // Per phase, bit r set when it uses resource r: at all (the solver), and positively (couplings).
    std::vector<uint64_t> use_mask, positive_mask;
    std::vector<uint64_t> proto_use, proto_positive;  // the same per distinct phase
    std::vector<uint32_t> flow_start;
    std::vector<double> proto_solo;
    std::vector<State> state;
    std::vector<size_t> pending, active, done_in_layer, log, flowing, ready;
    std::vector<SparseFlow> rows;
    std::vector<double> cap_now, x;
    FairShareScratch scratch;
  };
  static Workspace& workspace() {
    thread_local Workspace w;
    return w;
  }
  Workspace& w = workspace();
  std::vector<double>& solo = w.solo;
  std::vector<State>& state = w.state;
  std::vector<size_t>& pending = w.pending;
  std::vector<double>& remaining = w.remaining;  // seconds of delay, or fraction of the flow left
  SimTiming t;
  double now = 0;
  size_t done = 0;
  std::vector<size_t>& active = w.active;  // phases in delay or flow, in the order the oracle visits them

  // Bookkeeping for run_periodic only (null/unused in run): each phase's layer (-1: none), finished
  // phases per layer, the highest layer with a phase released or started, and a log of events
  // (2 * phase + 1 for a finish, 2 * phase for a start).
  const std::vector<int>* layer = nullptr;
  std::vector<size_t>& done_in_layer = w.done_in_layer;
  int touched_hi = -1;
  std::vector<size_t>& log = w.log;

  // step()'s working space, kept across events (and runs).
  std::vector<size_t>& flowing = w.flowing;
  std::vector<size_t>& ready = w.ready;
  std::vector<SparseFlow>& rows = w.rows;  // the flowing phases' flows
  std::vector<double>& cap_now = w.cap_now;
  std::vector<double>& x = w.x;
  FairShareScratch& scratch = w.scratch;

  Loop(const StepGraph& graph, const std::vector<double>& c, const std::vector<Coupling>& cp)
      : g(graph),
        cap(c),
        couplings(cp),
        n(graph.size_),
        own(graph.prepared_ ? Adjacency{} : graph.adjacency()),
        adj(graph.prepared_ ? graph.adj_ : own) {
    if (cap.size() != g.resources_) throw std::invalid_argument("wrong number of capacities");
    if (g.resources_ > 64) throw std::invalid_argument("the simulator handles at most 64 resources");
    if (!g.prepared_) g.check_acyclic(own);
    flows();
    state.assign(n, State::waiting);
    pending.resize(n);
    remaining.resize(n);
    active.clear(), done_in_layer.clear(), log.clear(), ready.clear();
    t.start.assign(n, 0.0);
    t.finish.assign(n, 0.0);
  }

  // Each phase's solo flow time (its roofline without latency) and its use per second at full speed,
  // amount / solo, as its nonzero entries: one pass over the amounts (mostly zero) of each distinct
  // phase, shared by its repeats.
  void flows() {
    const size_t R = g.resources_, D = g.distinct_;
    w.flow_resource.clear();
    w.flow_use.clear();
    w.proto_use.assign(D, 0);
    w.proto_positive.assign(D, 0);
    w.proto_solo.resize(D);
    std::vector<uint32_t>& start = w.flow_start;
    start.resize(D + 1);
    for (size_t d = 0; d < D; ++d) {
      const SimPhase& p = g.phases_[d];
      if (p.amount.size() != R) throw std::invalid_argument("phase " + p.name + ": wrong number of resources");
      const size_t first = w.flow_use.size();
      start[d] = uint32_t(first);
      double s = p.min_seconds;
      for (size_t r = 0; r < R; ++r) {
        const double a = p.amount[r];
        if (a == 0) continue;
        if (a > 0) {
          if (!(cap[r] > 0)) throw std::invalid_argument("phase " + p.name + " needs a resource of capacity 0");
          s = std::max(s, a / cap[r]);
        }
        w.flow_resource.push_back(uint8_t(r));
        w.flow_use.push_back(a);
      }
      w.proto_solo[d] = s;
      // amount -> use; a phase with no flow time never flows, and a use that underflows to 0 is none.
      size_t kept = first;
      if (s > 0)
        for (size_t k = first; k < w.flow_use.size(); ++k) {
          const double u = w.flow_use[k] / s;
          const uint8_t r = w.flow_resource[k];
          if (u == 0) continue;
          w.flow_resource[kept] = r;
          w.flow_use[kept++] = u;
          w.proto_use[d] |= uint64_t(1) << r;
          if (u > 0) w.proto_positive[d] |= uint64_t(1) << r;
        }
      w.flow_resource.resize(kept);
      w.flow_use.resize(kept);
    }
    start[D] = uint32_t(w.flow_use.size());
    w.flow.resize(n);
    w.use_mask.resize(n);
    w.positive_mask.resize(n);
    solo.resize(n);
    for (size_t i = 0; i < n; ++i) {  // after the pushes: the pointers stay valid
      const uint32_t d = g.proto_[i];
      w.flow[i] = {w.flow_resource.data() + start[d], w.flow_use.data() + start[d], start[d + 1] - start[d]};
      w.use_mask[i] = w.proto_use[d];
      w.positive_mask[i] = w.proto_positive[d];
      solo[i] = w.proto_solo[d];
    }
  }

  void touch(size_t i) {
    if (layer && (*layer)[i] > touched_hi) touched_hi = (*layer)[i];
  }

  void finish(size_t i, std::vector<size_t>& ready) {
    state[i] = State::done;
    t.finish[i] = now;
    ++done;
    if (layer) {
      log.push_back(2 * i + 1);
      if ((*layer)[i] >= 0) ++done_in_layer[size_t((*layer)[i])];
    }
    for (uint32_t k = adj.out_start[i]; k < adj.out_start[i + 1]; ++k) {
      const size_t j = adj.out[k];
      touch(j);
      if (--pending[j] == 0) ready.push_back(j);
    }
  }

  // Starting a phase may finish it at once (no latency, no work), which may ready others.
  void start_all(std::vector<size_t>& ready) {
    while (!ready.empty()) {
      const size_t i = ready.back();
      ready.pop_back();
      t.start[i] = now;
      touch(i);
      if (layer) log.push_back(2 * i);
      const double latency = g.phase(i).latency;
      if (latency > 0) { state[i] = State::delay; remaining[i] = latency; active.push_back(i); }
      else if (solo[i] > 0) { state[i] = State::flow; remaining[i] = 1.0; active.push_back(i); }
      else finish(i, ready);
    }
  }

  void init() {
    for (size_t i = 0; i < n; ++i) {
      pending[i] = adj.in_start[i + 1] - adj.in_start[i];
      if (pending[i] == 0) ready.push_back(i);
    }
    start_all(ready);
  }

  // One event: rates by max–min fairness, advance to the next delay end or flow completion, start
  // what that releases. Only phases in delay or flow are visited (a step has hundreds, few at once).
  void step() {
    flowing.clear();
    rows.clear();
    uint64_t all_use = 0, in_use = 0;  // the resources the flowing phases use: at all, positively
    for (size_t i : active)
      if (state[i] == State::flow) {
        flowing.push_back(i);
        rows.push_back(w.flow[i]);
        all_use |= w.use_mask[i];
        in_use |= w.positive_mask[i];
      }
    const std::vector<double>* c_now = &cap;
    for (const Coupling& c : couplings) {
      if (!((in_use >> c.a) & 1u) || !((in_use >> c.b) & 1u)) continue;
      if (c_now == &cap) cap_now = cap, c_now = &cap_now;
      cap_now[c.a] = std::min(cap[c.a], c.a_both), cap_now[c.b] = std::min(cap[c.b], c.b_both);
    }
    max_min_fair(*c_now, rows.data(), rows.size(), all_use, x, scratch);
    double dt = std::numeric_limits<double>::infinity();
    for (size_t i : active)
      if (state[i] == State::delay) dt = std::min(dt, remaining[i]);
    for (size_t k = 0; k < flowing.size(); ++k)
      if (x[k] > 0) dt = std::min(dt, remaining[flowing[k]] * solo[flowing[k]] / x[k]);
    if (!std::isfinite(dt)) throw std::logic_error("simulation stalled: no phase can progress");
    now += dt;
    constexpr double kEps = 1e-12;
    for (size_t k = 0; k < flowing.size(); ++k) {
      const size_t i = flowing[k];
      remaining[i] -= dt * x[k] / solo[i];
      if (remaining[i] <= kEps) finish(i, ready);
    }
    for (size_t i : active) {
      if (state[i] != State::delay) continue;
      remaining[i] -= dt;
      if (remaining[i] <= kEps * g.phase(i).latency) {
        if (solo[i] > 0) { state[i] = State::flow; remaining[i] = 1.0; }
        else finish(i, ready);
      }
    }
    std::erase_if(active, [&](size_t i) { return state[i] == State::done; });
    start_all(ready);  // appends what it starts to `active`, after the phases already there
  }
};

}  // namespace kvsim::sim
