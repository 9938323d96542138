// The machine's resources as the simulator sees them, and the map from a model phase to a simulated
// one. Efficiency (per phase kind, from the calibration file) is folded into the amounts: a phase that
// reaches half of HBM bandwidth moves twice its bytes of "ideal" HBM capacity. So a phase alone takes
// exactly its roofline time (model/roofline.hpp), and phases that overlap share the real ceilings.
#pragma once
#include <string>
#include <vector>

#include "model/phase.hpp"
#include "model/roofline.hpp"
#include "sim/step_graph.hpp"

namespace kvsim::sim {

// host_dispatch: the host thread that issues operators in an eager implementation (seconds of its time).
enum class Resource { tensor, simt, host_compute, hbm, dram, h2d, d2h, link, host_dispatch, count };

std::vector<double> capacities(const Machine& m);
// PCIe duplex: while both directions carry flows, each runs at its measured bidirectional rate.
std::vector<Coupling> couplings(const Machine& m);
const std::vector<std::string>& resource_names();  // "tensor", "simt", ..., in Resource order
SimPhase to_sim_phase(const Phase& p, const Machine& m);
// The same into `into`, reusing its storage.
void to_sim_phase(const Phase& p, const Machine& m, SimPhase& into);

}  // namespace kvsim::sim
