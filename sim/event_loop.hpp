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
  std::vector<double> solo;
  std::vector<double> use;  // per phase and resource: amount / solo, its use per second at full speed
  std::vector<State> state;
  std::vector<size_t> pending;
  std::vector<double> remaining;  // seconds of delay, or fraction of the flow left
  SimTiming t;
  double now = 0;
  size_t done = 0;
  std::vector<size_t> active;  // phases in delay or flow, in the order the oracle visits them

  // Bookkeeping for run_periodic only (null/unused in run): each phase's layer (-1: none), finished
  // phases per layer, the highest layer with a phase released or started, and a log of events
  // (2 * phase + 1 for a finish, 2 * phase for a start).
  const std::vector<int>* layer = nullptr;
  std::vector<size_t> done_in_layer;
  int touched_hi = -1;
  std::vector<size_t> log;

  // step()'s working space, kept across events.
  std::vector<size_t> flowing, ready;
  std::vector<const double*> rows;  // the flowing phases' rows of `use`
  std::vector<double> cap_now, x;
  FairShareScratch scratch;

  Loop(const StepGraph& graph, const std::vector<double>& c, const std::vector<Coupling>& cp)
      : g(graph),
        cap(c),
        couplings(cp),
        n(graph.size_),
        own(graph.prepared_ ? Adjacency{} : graph.adjacency()),
        adj(graph.prepared_ ? graph.adj_ : own) {
    if (cap.size() != g.resources_) throw std::invalid_argument("wrong number of capacities");
    if (!g.prepared_) g.check_acyclic(own);
    solo = g.solo_times(cap);
    use.assign(n * g.resources_, 0.0);
    for (size_t i = 0; i < n; ++i)
      if (solo[i] > 0)
        for (size_t r = 0; r < g.resources_; ++r) use[i * g.resources_ + r] = g.phases_[i].amount[r] / solo[i];
    state.assign(n, State::waiting);
    pending.resize(n);
    remaining.resize(n);
    t.start.assign(n, 0.0);
    t.finish.assign(n, 0.0);
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
      if (g.phases_[i].latency > 0) { state[i] = State::delay; remaining[i] = g.phases_[i].latency; active.push_back(i); }
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
    for (size_t i : active)
      if (state[i] == State::flow) {
        flowing.push_back(i);
        rows.push_back(&use[i * g.resources_]);
      }
    const std::vector<double>* c_now = &cap;
    for (const Coupling& c : couplings) {
      bool on_a = false, on_b = false;
      for (const double* u : rows) on_a |= u[c.a] > 0, on_b |= u[c.b] > 0;
      if (!(on_a && on_b)) continue;
      if (c_now == &cap) cap_now = cap, c_now = &cap_now;
      cap_now[c.a] = std::min(cap[c.a], c.a_both), cap_now[c.b] = std::min(cap[c.b], c.b_both);
    }
    max_min_fair(*c_now, rows.data(), rows.size(), x, scratch);
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
      if (remaining[i] <= kEps * std::max(1.0, g.phases_[i].latency)) {
        if (solo[i] > 0) { state[i] = State::flow; remaining[i] = 1.0; }
        else finish(i, ready);
      }
    }
    std::erase_if(active, [&](size_t i) { return state[i] == State::done; });
    start_all(ready);  // appends what it starts to `active`, after the phases already there
  }
};

}  // namespace kvsim::sim
