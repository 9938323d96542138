// Max–min fair sharing of resource capacities among concurrent flows — the one bandwidth-sharing model
// of kvsim's discrete-event simulator (as SimGrid's LMM solver is SimGrid's).
//
// Each running phase is a flow with a *normalized speed* x in [0, 1]: 1 is the speed it has alone on
// the machine (its roofline), so a phase alone finishes in exactly its roofline time. A flow needs
// `use[r] * x` of resource r per second (use[r] = its amount of r divided by its solo time), and every
// resource r is a constraint  sum_i use_i[r] * x_i <= capacity[r].
//
// Progressive filling finds the max–min fair point: raise every unfrozen flow's x together until a
// resource saturates (freeze the flows that use it) or a flow reaches 1 (freeze it); repeat. Flows
// that share a bottleneck are slowed by the same factor; a flow whose resources are free keeps its solo
// speed. Resource models (HBM, PCIe, DRAM, compute) only map their phases' work onto `use`.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace kvsim::sim {

struct Flow {
  std::vector<double> use;  // per resource, units per second at x = 1 (size = number of resources)
};

// Returns x for each flow. capacities.size() must equal every flow's use.size().
std::vector<double> max_min_fair(const std::vector<double>& capacities, const std::vector<Flow>& flows);

// A flow's use as its nonzero entries only: a phase touches one to three of the machine's resources,
// and the event loop solves at every event, so the solver visits only what a flow uses. Skipping the
// zero entries changes no bit of the result (adding +0 to a non-negative sum is exact).
struct SparseFlow {
  const uint8_t* resource;  // `count` resource indices, ascending
  const double* use;        // their use per second at x = 1, nonzero
  uint32_t count;
};

// The same for `n` sparse flows into `x`, with working space kept by the caller: an event should
// allocate nothing. `resources`: bit r set for every resource some flow uses (at most 64 resources).
struct FairShareScratch {
  std::vector<double> left, demand;
  std::vector<char> frozen;
  std::vector<uint32_t> used;  // the resources the flows use
};
void max_min_fair(const std::vector<double>& capacities, const SparseFlow* flows, std::size_t n, uint64_t resources,
                  std::vector<double>& x, FairShareScratch& scratch);

}  // namespace kvsim::sim
