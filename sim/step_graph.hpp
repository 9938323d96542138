// The phases of a decode step (or a prefill) as a DAG, and the discrete-event simulation that times it.
//
// A node is a phase: a fixed latency (kernel launches, call overheads), then a flow that moves
// `amount[r]` units through each resource r (bytes of HBM, PCIe, DRAM; FLOPs of a compute unit).
// An edge a -> b means b starts after a finishes; streams, prefetch and CPU–GPU co-execution are
// expressed as edges (or their absence). Phases that run at once share resources by max–min fairness
// (fair_share.hpp), and rates are recomputed at every start and finish. A phase running alone takes
// exactly latency + max_r amount[r] / capacity[r]: its roofline.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
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

// What a run computes besides the phases' start and finish times: everything (utilization and the
// critical path), or the makespan alone, for a caller that reads nothing else (a planner timing
// millions of steps).
enum class Detail { full, makespan };

// How run_periodic timed a graph (periodic_step.hpp).
enum class PeriodicOutcome { extrapolated, no_layer_structure, no_period };
struct PeriodicReport {
  PeriodicOutcome outcome = PeriodicOutcome::no_period;
  // With extra_layers: the phases of layers from this one on, and the phases after the layers, stand
  // for the phases extra_layers layers later in the longer graph; the ones before for themselves.
  int shifted_from = 0;
};

class StepGraph {
 public:
  explicit StepGraph(size_t resources) : resources_(resources) {}
  size_t add_phase(SimPhase&& p);
  size_t add_phase(const SimPhase& p);
  // A new phase the caller fills in place, in the storage an earlier layout left (reset): laying the
  // same graph out again allocates nothing. Its amounts must have resources() entries when it runs.
  std::pair<size_t, SimPhase*> emplace_phase();
  // Phase i's storage, to fill again in place: its new amounts, latency and limit (the same number of
  // amounts), for every phase that repeats it. The edges stay; the next run derives its rates again.
  SimPhase& refill_phase(size_t i) { return phases_[proto_[i]]; }
  // A phase equal to phase `of` (its name, latency, amounts and limit): the same phase in another
  // layer. Stored once, and the simulator derives its rates once for all its repeats.
  size_t add_repeat(size_t of);
  // Empties the graph but keeps its phases' storage: a planner lays out a step for every design point,
  // and refilling the same slots saves most of the allocations.
  void reset();
  // Lays out the edges as rows and checks them for a cycle once for the runs to come rather than at
  // every run; a graph laid out again with the same edges (after reset) keeps what it had. Adding a
  // phase or an edge, or reset, undoes it until the next prepare.
  void prepare();
  void add_edge(size_t before, size_t after);  // `after` waits for `before`
  size_t size() const { return size_; }
  const SimPhase& phase(size_t i) const { return phases_[proto_[i]]; }
  // Phase i is distinct phase proto(i) (add_repeat); distinct phases are numbered in the order added.
  size_t proto(size_t i) const { return proto_[i]; }
  size_t distinct() const { return distinct_; }

  // Simulates the DAG on resources of the given capacities (units per second). Throws
  // std::invalid_argument on a cycle or a capacity that is not positive where a phase needs it.
  SimTiming run(const std::vector<double>& capacity, const std::vector<Coupling>& couplings = {}) const;

  // The same result without simulating every layer (periodic_step.hpp): `layer` gives each phase's
  // layer (-1 for a phase outside the layers). Runs the full loop where the shortcut is not exact.
  // With `extra_layers` > 0 the graph stands for one with that many more copies of its repeating
  // layers (the caller's claim about its layout): makespan and utilization are the longer graph's and
  // each phase's times those of the phase it stands for (PeriodicReport::shifted_from), when the
  // report says `extrapolated`; otherwise the result is this graph's alone.
  SimTiming run_periodic(const std::vector<double>& capacity, const std::vector<Coupling>& couplings,
                         const std::vector<int>& layer, PeriodicReport* report = nullptr, int extra_layers = 0,
                         Detail detail = Detail::full) const;

 private:
  struct Loop;      // the event loop (event_loop.hpp), shared by run and run_periodic
  struct Periodic;  // run_periodic's layout check, snapshots and jump (periodic_step.cpp)
  friend struct Loop;
  friend struct Periodic;
  // The edges as compressed rows, built once per run from `edges_`: each phase's successors (and
  // predecessors) in the order their edges were added, the order the loop releases phases in.
  struct Adjacency {
    std::vector<uint32_t> out_start, out, in_start, in;
  };
  Adjacency adjacency() const;
  // Pieces of run(); each runs once per call, outside its event loop.
  void check_acyclic(const Adjacency& a) const;  // throws std::invalid_argument on a cycle
  // makespan, utilization, critical path
  // (with Detail::makespan only the makespan). `moved_before`: per resource, an amount moved besides
  // the graph's phases (the extra layers of run_periodic's longer graph), added first.
  void summarize(SimTiming& t, const std::vector<double>& cap, const Adjacency& a, Detail detail,
                 const std::vector<double>* moved_before = nullptr) const;
  size_t resources_;
  std::vector<SimPhase> phases_;  // the first distinct_ are the graph's; the rest are storage kept by reset()
  std::vector<uint32_t> proto_;   // per phase: its index in phases_
  size_t size_ = 0, distinct_ = 0;
  std::vector<std::pair<uint32_t, uint32_t>> edges_;  // (before, after), in the order added
  Adjacency adj_;                                     // prepare()'s, made from adj_edges_ on adj_size_ phases
  std::vector<std::pair<uint32_t, uint32_t>> adj_edges_;
  size_t adj_size_ = 0;
  bool prepared_ = false;
};

}  // namespace kvsim::sim
