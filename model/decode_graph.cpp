#include "model/decode_graph.hpp"

#include <algorithm>

#include <stdexcept>
#include <string>

#include "model/resources.hpp"

namespace kvsim::sim {

bool is_single_stream(const std::vector<Phase>& policy_phases) {
  for (const Phase& p : policy_phases)
    if (p.stream != Stream::gpu) return false;
  return true;
}

namespace {
// One instance of a phase whose work is the total of `repeat` instances.
SimPhase instance(const Phase& p, const Machine& m) {
  Phase one = p;
  if (p.repeat > 1) {
    const double k = 1.0 / p.repeat;
    Work& w = one.work;
    w.flops *= k, w.hbm_bytes *= k, w.dram_bytes *= k, w.h2d_bytes *= k, w.d2h_bytes *= k;
    w.link_bytes *= k, w.launches *= k;
    one.repeat = 1;  // one instance now: a `bytes` efficiency curve must see this instance's bytes, as the roofline does
  }
  return to_sim_phase(one, m);
}
}  // namespace

DecodeGraph build_decode_graph(const std::vector<Phase>& pol, const std::vector<Phase>& dense, int layers,
                               const Machine& m) {
  DecodeGraph g{size_t(Resource::count)};  // braces: clang reads the parenthesized form as a function declaration
  const size_t np = pol.size();
  size_t qkv = dense.size();
  for (size_t i = 0; i < dense.size(); ++i)
    if (dense[i].name == "qkv_proj") qkv = i;
  if (qkv == dense.size()) throw std::invalid_argument("decode graph: no qkv_proj phase");

  constexpr size_t kNone = SIZE_MAX;
  size_t last_on[size_t(Stream::count)];
  for (auto& x : last_on) x = kNone;
  // An eager implementation's host dispatch stream (Machine::dispatch_layer_s): before each phase node, a
  // node on the host_dispatch resource issues its operators — the layer's operators shared out by
  // the phases' launches — chained in program order, and the phase waits for it. The host runs ahead
  // of the GPU while it can; when issuing is slower than executing, the GPU waits.
  double layer_launches = 0, step_launches = 0;
  for (const auto* list : {&pol, &dense})
    for (const Phase& p : *list) (p.repeat > 1 ? layer_launches : step_launches) += gpu_launches(p) / std::max(1.0, p.repeat);
  size_t last_dispatch = kNone;
  auto dispatch = [&](const Phase& p, int layer) -> size_t {
    if (!m.has_dispatch()) return kNone;
    const double launches = gpu_launches(p) / std::max(1.0, p.repeat);
    const double host_s = layer >= 0 ? (layer_launches > 0 ? m.dispatch_layer_s * launches / layer_launches : 0)
                                     : (step_launches > 0 ? m.dispatch_step_s * launches / step_launches : 0);
    if (!(host_s > 0)) return kNone;
    SimPhase d;
    d.name = "dispatch " + std::string(p.name);
    d.amount.assign(size_t(Resource::count), 0.0);
    d.amount[size_t(Resource::host_dispatch)] = host_s;
    const size_t id = g.graph.add_phase(std::move(d));
    g.source.push_back(kNone);
    g.layer.push_back(layer);
    if (last_dispatch != kNone) g.graph.add_edge(last_dispatch, id);
    last_dispatch = id;
    return id;
  };
  auto add = [&](const Phase& p, size_t src, int layer) {
    const size_t issued = dispatch(p, layer);
    const size_t id = g.graph.add_phase(instance(p, m));
    g.source.push_back(src);
    g.layer.push_back(layer);
    if (issued != kNone) g.graph.add_edge(issued, id);
    size_t& prev = last_on[size_t(p.stream)];
    if (prev != kNone) g.graph.add_edge(prev, id);
    prev = id;
    return id;
  };

  // Once-per-step policy phases (e.g. CHESS's selection) run before the first layer.
  for (size_t i = 0; i < np; ++i)
    if (pol[i].repeat <= 1) add(pol[i], i, -1);
  std::vector<size_t> node(np, kNone);
  for (int l = 0; l < layers; ++l) {
    const size_t q = add(dense[qkv], np + qkv, l);
    for (size_t i = 0; i < np; ++i) {
      if (pol[i].repeat <= 1) continue;
      node[i] = add(pol[i], i, l);
      g.graph.add_edge(q, node[i]);
      for (int8_t a : pol[i].after) {
        if (a < 0) continue;
        if (size_t(a) >= np || node[size_t(a)] == kNone || size_t(a) == i)
          throw std::invalid_argument("decode graph: phase " + std::string(pol[i].name) + " waits for an unknown phase");
        g.graph.add_edge(node[size_t(a)], node[i]);
      }
    }
    bool first_post = true;
    for (size_t i = 0; i < dense.size(); ++i) {
      if (i == qkv || dense[i].repeat <= 1) continue;
      const size_t id = add(dense[i], np + i, l);
      if (first_post) {
        for (size_t k = 0; k < np; ++k)
          if (pol[k].repeat > 1 && !pol[k].detached && pol[k].stream != Stream::gpu) g.graph.add_edge(node[k], id);
        first_post = false;
      }
    }
  }
  for (size_t i = 0; i < dense.size(); ++i)
    if (dense[i].repeat <= 1) add(dense[i], np + i, -1);
  return g;
}

}  // namespace kvsim::sim
