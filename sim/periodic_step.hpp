// StepGraph::run_periodic: a layered step graph timed without simulating every layer, exactly.
//
// Every layer of a decode step has the same phases and edges, and the event loop's evolution depends
// only on its state (each phase's state, predecessors left, and remaining delay or flow; the order of
// the running phases), never on the clock. So when the state at the start of layer l+1's first phase
// equals the state at the start of layer l's, shifted by one layer, the loop repeats itself: layer
// l+1 to l+2 is layer l to l+1 again, one period P later. run_periodic simulates layer by layer,
// compares each layer boundary's state with the one before it (bitwise, in a form relative to the
// boundary's layer), and at the first match jumps: every start and finish of the period is copied to
// the layers that follow, shifted by whole periods, the state is shifted by as many layers, and the
// loop goes on from there through the last layers and the phases after them (which the period must
// not reach: the jump stops short of the last layer by the period's reach). Up to the jump the two
// runs do the same arithmetic; past it the times differ from run()'s by the rounding of the sums.
//
// Where that is not exact it runs the full loop instead, and says why (PeriodicOutcome, counted in
// periodic_counters()): the layers are not laid out alike (fewer than four, not contiguous, phases or
// edges that differ from layer to layer), or no two boundaries match before the end (a stream whose
// backlog grows every layer, a phase outside the layers still running).
#pragma once
#include <atomic>
#include <cstdint>

#include "sim/step_graph.hpp"

namespace kvsim::sim {

struct PeriodicCounters {
  std::atomic<uint64_t> extrapolated{0}, no_layer_structure{0}, no_period{0};
};

// Process-wide counts of run_periodic's outcomes (tests and benchmarks read them).
PeriodicCounters& periodic_counters();

}  // namespace kvsim::sim
