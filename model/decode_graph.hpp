// Lays out one decode step as a phase DAG for the simulator, from the dense transformer's phases and
// a policy's phases (both as totals over the step, see model/phase.hpp).
//
// Layout, for layers l = 0..L-1 after the policy's once-per-step phases:
//   qkv_proj(l) -> [the policy's per-layer phases, on their streams] -> o_proj(l) -> ... -> mlp(l)
// then the LM head. Phases on one stream keep their order across layers (a CUDA stream, a copy
// engine queue, the host's worker pool); a policy phase waits for its layer's qkv_proj (it needs q)
// and for the phases it names in `after`; the first dense phase after attention waits for every
// policy phase of the layer that is not `detached`. So a copy on the h2d stream overlaps GPU work of
// the same layer that does not depend on it, and CPU work overlaps the GPU's.
//
// An eager implementation (Machine::has_dispatch) adds a host dispatch node before each phase node, in
// program order; its host-device syncs add edges from the GPU's main stream back to that chain: the
// step's operators issued before the first layer (Machine::dispatch_step_pre_s) form one node ahead of
// everything, and with Machine::sync_per_layer the dispatch of each layer's first GPU attention phase
// waits for the last kernel issued before it. A phase with a lead (Phase::lead_fraction, the
// concatenating KV append) is then cut into two nodes with the sync between them.
#pragma once
#include <array>
#include <string_view>
#include <vector>

#include "model/phase.hpp"
#include "model/roofline.hpp"
#include "sim/step_graph.hpp"

namespace kvsim::sim {

struct DecodeGraph {
  StepGraph graph;
  std::vector<size_t> source;  // per node: index into the concatenated list (policy phases, then dense); SIZE_MAX for a host dispatch node
  std::vector<int> layer;      // per node: its layer, or -1 for a once-per-step phase
  // What its nodes and edges were laid out from (everything but the phases' work): a step of the same
  // shape is laid out again by filling the nodes' phases alone (build_decode_graph).
  struct Shape {
    struct PhaseShape {
      std::string_view name;  // static text (Phase::name)
      PhaseKind kind;
      Stream stream;
      std::array<int8_t, 3> after;
      bool per_layer, detached, lead;
      bool operator==(const PhaseShape&) const;
    };
    std::vector<PhaseShape> phases;  // policy phases, then dense
    size_t n_policy = 0;
    int layers = 0;
    bool sync_per_layer = false, refillable = false;
    bool operator==(const Shape&) const;
  } shape;
  // The layout's working lists, kept with the graph so that laying out step after step allocates nothing.
  // A node whose phase the layout converted from a phase of the step (the others are repeats of these,
  // or dispatch nodes): `source` as above, `piece` its part (whole, or the lead or rest of a cut phase).
  struct Fill {
    size_t node, source;
    int8_t piece;
  };
  struct Scratch {
    std::vector<size_t> node_of, first, first_dispatch;
    std::vector<Fill> fills;
    Shape next_shape;
  } scratch;
  explicit DecodeGraph(size_t resources) : graph(resources) {}
};

// True when every phase runs on the GPU's main stream: the step is then a chain and its time is the
// sum of the phases' rooflines exactly, with no need to simulate.
bool is_single_stream(const std::vector<Phase>& policy_phases);

// `dense` must contain a phase named "qkv_proj" (add_decode_dense_phases). `layers` is the model's L.
DecodeGraph build_decode_graph(const std::vector<Phase>& policy_phases, const std::vector<Phase>& dense,
                               int layers, const Machine& m);
// The same into `into`, whose storage is reused (StepGraph::reset): for a caller that lays out many
// steps. `into` must have been made with Resource::count resources.
void build_decode_graph(DecodeGraph& into, const std::vector<Phase>& policy_phases, const std::vector<Phase>& dense,
                        int layers, const Machine& m);

}  // namespace kvsim::sim
