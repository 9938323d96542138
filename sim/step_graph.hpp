// The phases of a decode step (or a prefill) as a DAG, and the discrete-event simulation that times it.
//
// A node is a phase: a fixed latency (kernel launches, call overheads), then a flow that moves
// `amount[r]` units through each resource r (bytes of HBM, PCIe, DRAM; FLOPs of a compute unit).
// An edge a -> b means b starts after a finishes; streams, prefetch and CPU–GPU co-execution are
// expressed as edges (or their absence). Phases that run at once share resources by max–min fairness
// (fair_share.hpp), and rates are recomputed at every start and finish. A phase running alone takes
// exactly latency + max_r amount[r] / capacity[r]: its roofline.
#pragma once
#include <boost/graph/adjacency_list.hpp>
#include <string>
#include <vector>

namespace kvsim::sim {

struct SimPhase {
  std::string name;
  double latency = 0;           // seconds before the flow starts
  std::vector<double> amount;   // per resource, in the resource's units (already divided by efficiency)
  // The flow's solo time is at least this: a limit of the phase itself rather than of a shared resource
  // (a host phase on fewer threads than the host has cores reaches only their share of its compute and
  // DRAM bandwidth). Its use of each resource at full speed is then amount / min_seconds.
  double min_seconds = 0;
};

// Two resources whose capacities drop while both carry flows: PCIe's two directions share DMA
// engines and the root complex, so H2D can lose half its bandwidth under simultaneous D2H. While
// at least one running flow uses `a` and one uses `b`, their capacities are `a_both` and `b_both`.
struct Coupling {
  size_t a = 0, b = 0;
  double a_both = 0, b_both = 0;
};

struct SimTiming {
  double makespan = 0;
  std::vector<double> start, finish;  // per phase, seconds
  std::vector<double> utilization;    // per resource: amount moved / (capacity x makespan), in [0, 1]
  std::vector<size_t> critical_path;  // phases from a source to the last to finish, each released by the one before
};

class StepGraph {
 public:
  explicit StepGraph(size_t resources) : resources_(resources) {}
  size_t add_phase(SimPhase p);
  void add_edge(size_t before, size_t after);  // `after` waits for `before`
  size_t size() const { return phases_.size(); }
  const SimPhase& phase(size_t i) const { return phases_[i]; }

  // Simulates the DAG on resources of the given capacities (units per second). Throws
  // std::invalid_argument on a cycle or a capacity that is not positive where a phase needs it.
  SimTiming run(const std::vector<double>& capacity, const std::vector<Coupling>& couplings = {}) const;

 private:
  using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::bidirectionalS>;
  // Pieces of run(); each runs once per call, outside its event loop.
  void check_acyclic() const;  // throws std::invalid_argument on a cycle
  std::vector<double> solo_times(const std::vector<double>& cap) const;  // per phase: roofline without latency
  void summarize(SimTiming& t, const std::vector<double>& cap) const;    // makespan, utilization, critical path
  size_t resources_;
  std::vector<SimPhase> phases_;
  Graph graph_;
};

}  // namespace kvsim::sim
