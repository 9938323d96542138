#include "sim/step_graph.hpp"

#include <algorithm>
#include <cmath>
#include <boost/graph/topological_sort.hpp>
#include <iterator>
#include <limits>
#include <stdexcept>

#include "sim/fair_share.hpp"

namespace kvsim::sim {

size_t StepGraph::add_phase(SimPhase p) {
  if (p.amount.size() != resources_) throw std::invalid_argument("phase " + p.name + ": wrong number of resources");
  phases_.push_back(std::move(p));
  return boost::add_vertex(graph_);
}

void StepGraph::add_edge(size_t before, size_t after) {
  if (before >= phases_.size() || after >= phases_.size()) throw std::invalid_argument("edge to an unknown phase");
  boost::add_edge(before, after, graph_);
}

// A topological sort only to detect a cycle; the simulation itself releases phases by counting predecessors.
void StepGraph::check_acyclic() const {
  std::vector<Graph::vertex_descriptor> order;
  try {
    boost::topological_sort(graph_, std::back_inserter(order));
  } catch (const boost::not_a_dag&) {
    throw std::invalid_argument("the phase graph has a cycle");
  }
}

// Solo flow time of each phase (its roofline without latency); its per-second use at x = 1 is amount / solo.
std::vector<double> StepGraph::solo_times(const std::vector<double>& cap) const {
  const size_t n = phases_.size();
  std::vector<double> solo(n, 0.0);
  for (size_t i = 0; i < n; ++i) {
    solo[i] = phases_[i].min_seconds;
    for (size_t r = 0; r < resources_; ++r) {
      if (phases_[i].amount[r] <= 0) continue;
      if (!(cap[r] > 0)) throw std::invalid_argument("phase " + phases_[i].name + " needs a resource of capacity 0");
      solo[i] = std::max(solo[i], phases_[i].amount[r] / cap[r]);
    }
  }
  return solo;
}

// Once every phase has its finish time: the makespan, each resource's utilization and the critical path.
void StepGraph::summarize(SimTiming& t, const std::vector<double>& cap) const {
  const size_t n = phases_.size();
  size_t last = 0;
  for (size_t i = 0; i < n; ++i)
    if (t.finish[i] > t.makespan) t.makespan = t.finish[i], last = i;
  t.utilization.assign(resources_, 0.0);
  if (t.makespan > 0)
    for (size_t r = 0; r < resources_; ++r) {
      double moved = 0;
      for (const SimPhase& p : phases_) moved += p.amount[r];
      t.utilization[r] = moved / (cap[r] * t.makespan);
    }
  // Walk back from the last phase to finish through the predecessor that finished last (the one that
  // released it): the chain of dependencies that sets the makespan.
  if (n > 0) {
    for (size_t i = last;;) {
      t.critical_path.push_back(i);
      auto [e, end] = boost::in_edges(i, graph_);
      if (e == end) break;
      size_t pred = boost::source(*e, graph_);
      for (; e != end; ++e)
        if (t.finish[boost::source(*e, graph_)] > t.finish[pred]) pred = boost::source(*e, graph_);
      i = pred;
    }
    std::reverse(t.critical_path.begin(), t.critical_path.end());
  }
}

SimTiming StepGraph::run(const std::vector<double>& cap, const std::vector<Coupling>& couplings) const {
  const size_t n = phases_.size();
  if (cap.size() != resources_) throw std::invalid_argument("wrong number of capacities");
  check_acyclic();
  const std::vector<double> solo = solo_times(cap);

  enum class State { waiting, delay, flow, done };
  std::vector<State> state(n, State::waiting);
  std::vector<size_t> pending(n);
  std::vector<double> remaining(n);  // seconds of delay, or fraction of the flow left
  SimTiming t;
  t.start.assign(n, 0.0);
  t.finish.assign(n, 0.0);
  double now = 0;
  size_t done = 0;

  auto finish = [&](size_t i, std::vector<size_t>& ready) {
    state[i] = State::done;
    t.finish[i] = now;
    ++done;
    for (auto [e, end] = boost::out_edges(i, graph_); e != end; ++e) {
      const size_t j = boost::target(*e, graph_);
      if (--pending[j] == 0) ready.push_back(j);
    }
  };
  // Starting a phase may finish it at once (no latency, no work), which may ready others.
  std::vector<size_t> newly_started;
  auto start_all = [&](std::vector<size_t> ready) {
    while (!ready.empty()) {
      const size_t i = ready.back();
      ready.pop_back();
      t.start[i] = now;
      if (phases_[i].latency > 0) { state[i] = State::delay; remaining[i] = phases_[i].latency; newly_started.push_back(i); }
      else if (solo[i] > 0) { state[i] = State::flow; remaining[i] = 1.0; newly_started.push_back(i); }
      else finish(i, ready);
    }
  };
  {
    std::vector<size_t> ready;
    for (size_t i = 0; i < n; ++i) {
      pending[i] = boost::in_degree(i, graph_);
      if (pending[i] == 0) ready.push_back(i);
    }
    start_all(ready);
  }

  // Only phases in delay or flow are visited per event (a step graph has hundreds of phases, few at once).
  std::vector<size_t> active = newly_started;
  newly_started.clear();
  std::vector<size_t> flowing;
  std::vector<Flow> flows;
  std::vector<double> cap_now = cap;
  while (done < n) {
    flowing.clear();
    flows.clear();
    for (size_t i : active)
      if (state[i] == State::flow) {
        flowing.push_back(i);
        Flow f;
        f.use.resize(resources_);
        for (size_t r = 0; r < resources_; ++r) f.use[r] = phases_[i].amount[r] / solo[i];
        flows.push_back(std::move(f));
      }
    cap_now = cap;
    for (const Coupling& c : couplings) {
      bool on_a = false, on_b = false;
      for (const Flow& f : flows) on_a |= f.use[c.a] > 0, on_b |= f.use[c.b] > 0;
      if (on_a && on_b) cap_now[c.a] = std::min(cap[c.a], c.a_both), cap_now[c.b] = std::min(cap[c.b], c.b_both);
    }
    const std::vector<double> x = max_min_fair(cap_now, flows);
    // Time to the next event: a delay ends or a flow completes.
    double dt = std::numeric_limits<double>::infinity();
    for (size_t i : active)
      if (state[i] == State::delay) dt = std::min(dt, remaining[i]);
    for (size_t k = 0; k < flowing.size(); ++k)
      if (x[k] > 0) dt = std::min(dt, remaining[flowing[k]] * solo[flowing[k]] / x[k]);
    if (!std::isfinite(dt)) throw std::logic_error("simulation stalled: no phase can progress");
    now += dt;
    std::vector<size_t> ready;
    constexpr double kEps = 1e-12;
    for (size_t k = 0; k < flowing.size(); ++k) {
      const size_t i = flowing[k];
      remaining[i] -= dt * x[k] / solo[i];
      if (remaining[i] <= kEps) finish(i, ready);
    }
    for (size_t i : active) {
      if (state[i] != State::delay) continue;
      remaining[i] -= dt;
      if (remaining[i] <= kEps * std::max(1.0, phases_[i].latency)) {
        if (solo[i] > 0) { state[i] = State::flow; remaining[i] = 1.0; }
        else finish(i, ready);
      }
    }
    std::erase_if(active, [&](size_t i) { return state[i] == State::done; });
    start_all(ready);
    // Newly started phases (start_all may cascade through zero-work phases) join the active set.
    for (size_t i : newly_started) active.push_back(i);
    newly_started.clear();
  }
  summarize(t, cap);
  return t;
}

}  // namespace kvsim::sim
