#include "sim/step_graph.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <stdexcept>

#include "sim/event_loop.hpp"

namespace kvsim::sim {

size_t StepGraph::add_phase(SimPhase&& p) {
  if (p.amount.size() != resources_) throw std::invalid_argument("phase " + p.name + ": wrong number of resources");
  prepared_ = false;
  if (distinct_ < phases_.size()) phases_[distinct_] = std::move(p);
  else phases_.push_back(std::move(p));
  proto_.push_back(uint32_t(distinct_++));
  return size_++;
}

size_t StepGraph::add_phase(const SimPhase& p) {
  if (p.amount.size() != resources_) throw std::invalid_argument("phase " + p.name + ": wrong number of resources");
  prepared_ = false;
  if (distinct_ < phases_.size()) phases_[distinct_] = p;  // copy-assigned: the slot's name and amounts keep their storage
  else phases_.push_back(p);
  proto_.push_back(uint32_t(distinct_++));
  return size_++;
}

std::pair<size_t, SimPhase*> StepGraph::emplace_phase() {
  prepared_ = false;
  if (distinct_ == phases_.size()) phases_.emplace_back();
  proto_.push_back(uint32_t(distinct_));
  return {size_++, &phases_[distinct_++]};
}

size_t StepGraph::add_repeat(size_t of) {
  if (of >= size_) throw std::invalid_argument("repeat of an unknown phase");
  prepared_ = false;
  proto_.push_back(proto_[of]);
  return size_++;
}

void StepGraph::reset() {
  size_ = 0;
  distinct_ = 0;
  proto_.clear();
  edges_.clear();
  prepared_ = false;
}

void StepGraph::prepare() {
  if (adj_size_ != size_ || adj_edges_ != edges_) {
    Adjacency a = adjacency();
    check_acyclic(a);
    adj_ = std::move(a);
    adj_edges_ = edges_;
    adj_size_ = size_;
  }
  prepared_ = true;
}

void StepGraph::add_edge(size_t before, size_t after) {
  if (before >= size_ || after >= size_) throw std::invalid_argument("edge to an unknown phase");
  prepared_ = false;
  edges_.emplace_back(uint32_t(before), uint32_t(after));
}

// Compressed rows by a stable counting sort: a phase's edges keep the order they were added in.
StepGraph::Adjacency StepGraph::adjacency() const {
  const size_t n = size_;
  Adjacency a;
  a.out_start.assign(n + 1, 0);
  a.in_start.assign(n + 1, 0);
  for (auto [u, v] : edges_) ++a.out_start[u + 1], ++a.in_start[v + 1];
  for (size_t i = 0; i < n; ++i) a.out_start[i + 1] += a.out_start[i], a.in_start[i + 1] += a.in_start[i];
  a.out.resize(edges_.size());
  a.in.resize(edges_.size());
  std::vector<uint32_t> o(a.out_start.begin(), a.out_start.end() - 1), in(a.in_start.begin(), a.in_start.end() - 1);
  for (auto [u, v] : edges_) a.out[o[u]++] = v, a.in[in[v]++] = u;
  return a;
}

// Kahn's algorithm only to detect a cycle; the simulation itself releases phases by counting predecessors.
void StepGraph::check_acyclic(const Adjacency& a) const {
  const size_t n = size_;
  std::vector<uint32_t> left(n), ready;
  for (size_t i = 0; i < n; ++i)
    if ((left[i] = a.in_start[i + 1] - a.in_start[i]) == 0) ready.push_back(uint32_t(i));
  size_t seen = 0;
  while (!ready.empty()) {
    const uint32_t i = ready.back();
    ready.pop_back();
    ++seen;
    for (uint32_t k = a.out_start[i]; k < a.out_start[i + 1]; ++k)
      if (--left[a.out[k]] == 0) ready.push_back(a.out[k]);
  }
  if (seen != n) throw std::invalid_argument("the phase graph has a cycle");
}

// Once every phase has its finish time: the makespan, each resource's utilization and the critical path.
void StepGraph::summarize(SimTiming& t, const std::vector<double>& cap, const Adjacency& a, Detail detail,
                          const std::vector<double>* moved_before) const {
  const size_t n = size_;
  size_t last = 0;
  for (size_t i = 0; i < n; ++i)
    if (t.finish[i] > t.makespan) t.makespan = t.finish[i], last = i;
  if (detail == Detail::makespan) return;
  // Per resource the amount every phase moves, summed in phase order (phases outer: each phase's
  // amounts are contiguous), after `moved_before`.
  t.utilization = moved_before ? *moved_before : std::vector<double>(resources_, 0.0);
  if (t.makespan > 0) {
    for (size_t i = 0; i < n; ++i)
      for (size_t r = 0; r < resources_; ++r) t.utilization[r] += phase(i).amount[r];
    for (size_t r = 0; r < resources_; ++r) t.utilization[r] /= cap[r] * t.makespan;
  } else {
    t.utilization.assign(resources_, 0.0);
  }
  // Walk back from the last phase to finish through the predecessor that finished last (the one that
  // released it): the chain of dependencies that sets the makespan.
  if (n > 0) {
    for (size_t i = last;;) {
      t.critical_path.push_back(i);
      if (a.in_start[i] == a.in_start[i + 1]) break;
      size_t pred = a.in[a.in_start[i]];
      for (uint32_t k = a.in_start[i]; k < a.in_start[i + 1]; ++k)
        if (t.finish[a.in[k]] > t.finish[pred]) pred = a.in[k];
      i = pred;
    }
    std::reverse(t.critical_path.begin(), t.critical_path.end());
  }
}

SimTiming StepGraph::run(const std::vector<double>& cap, const std::vector<Coupling>& couplings) const {
  Loop loop(*this, cap, couplings);
  loop.init();
  while (loop.done < loop.n) loop.step();
  summarize(loop.t, cap, loop.adj, Detail::full);
  return std::move(loop.t);
}

}  // namespace kvsim::sim
