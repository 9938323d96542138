#include "model/decode_graph.hpp"

#include <algorithm>
#include <iterator>
#include <stdexcept>
#include <string>
#include <utility>

#include "model/resources.hpp"

namespace kvsim::sim {

bool is_single_stream(const std::vector<Phase>& policy_phases) {
  for (const Phase& p : policy_phases)
    if (p.stream != Stream::gpu) return false;
  return true;
}

namespace {
constexpr size_t kNone = SIZE_MAX;

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

// The GPU kernels of one instance (gpu_launches): a host phase's host calls (Phase::lanes) are not
// operators the host dispatches.
double launches_of(const Phase& p) { return gpu_launches(p) / std::max(1.0, double(p.repeat)); }

// The kernels of a phase with a lead piece (Phase::lead_fraction): all but the last for the lead.
double lead_launches(const Phase& p) { return std::max(0.0, launches_of(p) - 1); }

// A piece of a simulated phase: `f` of its amount on every resource and `f_latency` of its latency,
// so that the lead and the rest alone take exactly the phase's roofline time together.
SimPhase piece(SimPhase s, const char* suffix, double f, double f_latency) {
  s.name += suffix;
  for (double& a : s.amount) a *= f;
  s.latency *= f_latency;
  return s;
}

// Lays out the decode step (see decode_graph.hpp). With an eager implementation's host dispatch
// stream (Machine::dispatch_layer_s), a node on the host_dispatch resource before each phase node
// issues that phase's share of the operators, chained in program order, and the phase waits for it:
// the host runs ahead of the GPU while it can; when issuing is slower than executing, the GPU waits.
// A host-device sync (Machine::sync_per_layer) is an edge from the last kernel issued to the next
// dispatch node: the host waits for the GPU there.
class Builder {
 public:
  // Builds into `g`, which the caller owns and returns: the graph is never copied or moved (its Boost
  // adjacency list copies where it cannot move, which cost a third of a simulated design point).
  Builder(const std::vector<Phase>& pol, const std::vector<Phase>& dense, const Machine& m, DecodeGraph& g)
      : pol_(pol), dense_(dense), m_(m), g_(g) {
    qkv_ = dense.size();
    for (size_t i = 0; i < dense.size(); ++i)
      if (dense[i].name == "qkv_proj") qkv_ = i;
    if (qkv_ == dense.size()) throw std::invalid_argument("decode graph: no qkv_proj phase");
    std::fill(std::begin(last_on_), std::end(last_on_), kNone);
    plan_dispatch_shares();
    sims_.resize(pol.size() + dense.size());
    for (auto* f : {&first_, &first_dispatch_}) f->assign(3 * sims_.size(), kNone);
  }

  void build(int layers) {
    // The step's operators issued before the first layer (Machine::dispatch_step_pre_s).
    if (m_.dispatch_step_pre_s > 0) dispatch("dispatch step (before the layers)", "", m_.dispatch_step_pre_s, -1);
    // Once-per-step policy phases (e.g. CHESS's selection) run before the first layer.
    for (size_t i = 0; i < pol_.size(); ++i)
      if (pol_[i].repeat <= 1) add(pol_[i], instance(pol_[i], m_), i, -1, step_share(pol_[i]));
    for (int l = 0; l < layers; ++l) add_layer(l);
    for (size_t i = 0; i < dense_.size(); ++i)
      if (dense_[i].repeat <= 1) add(dense_[i], instance(dense_[i], m_), pol_.size() + i, -1, step_share(dense_[i]));
  }

 private:
  // Host seconds per launch: of the layer's operators before its sync and after it, and of the step's
  // operators after the first layer's start. Without a sync the whole layer is one group.
  void plan_dispatch_shares() {
    double layer = 0, step = 0;
    for (const auto* list : {&pol_, &dense_})
      for (const Phase& p : *list) (p.repeat > 1 ? layer : step) += launches_of(p);
    sync_at_ = m_.sync_per_layer ? first_attention() : kNone;
    double pre = 0;  // launches issued before the sync: q/k/v, the policy phases before its attention, the lead
    if (sync_at_ != kNone) {
      pre = launches_of(dense_[qkv_]);
      for (size_t i = 0; i < sync_at_; ++i)
        if (pol_[i].repeat > 1) pre += launches_of(pol_[i]);
      if (pol_[sync_at_].lead_fraction > 0) pre += lead_launches(pol_[sync_at_]);
    }
    const double pre_s = sync_at_ != kNone ? m_.dispatch_layer_pre_sync_s : 0;
    per_launch_pre_ = pre > 0 ? pre_s / pre : 0;
    per_launch_post_ = layer - pre > 0 ? (m_.dispatch_layer_s - pre_s) / (layer - pre) : 0;
    per_launch_step_ = step > 0 ? std::max(0.0, m_.dispatch_step_s - m_.dispatch_step_pre_s) / step : 0;
  }

  // The policy's first per-layer attention on the GPU's main stream: the attention call where the
  // layer's sync falls. kNone when the policy has none (then no sync is placed).
  size_t first_attention() const {
    for (size_t i = 0; i < pol_.size(); ++i)
      if (pol_[i].repeat > 1 && pol_[i].kind == PhaseKind::attention && pol_[i].stream == Stream::gpu) return i;
    return kNone;
  }

  double step_share(const Phase& p) const { return per_launch_step_ * launches_of(p); }

  // A per-layer phase's simulated instance (src: policy phases, then dense), converted once: every
  // layer has the same, and the conversion (efficiency curves) is most of a layer's cost to lay out.
  const SimPhase& per_layer(size_t src) {
    SimPhase& s = sims_[src];
    if (s.amount.empty()) s = instance(src < pol_.size() ? pol_[src] : dense_[src - pol_.size()], m_);
    return s;
  }

  // A host dispatch node named `prefix` + `name`, chained after the previous one; `after_gpu` also makes
  // it wait for the last kernel issued on the GPU's main stream (a host-device sync). `first`: where a
  // node issuing the same phase in another layer is kept (it is repeated, add_repeat), or null.
  size_t dispatch(const char* prefix, const std::string& name, double host_s, int layer, bool after_gpu = false,
                  size_t* first = nullptr) {
    if (!m_.has_dispatch() || !(host_s > 0 || after_gpu)) return kNone;  // a sync holds the host even with nothing to issue
    size_t id;
    if (first && *first != kNone) {
      id = repeat(*first, kNone, layer);
    } else {
      SimPhase& d = dispatch_;  // reused: its name and amounts keep their storage from node to node
      d.name.assign(prefix).append(name);
      d.latency = d.min_seconds = 0;
      d.amount.assign(size_t(Resource::count), 0.0);
      d.amount[size_t(Resource::host_dispatch)] = std::max(0.0, host_s);
      id = node(d, kNone, layer);
      if (first) *first = id;
    }
    if (last_dispatch_ != kNone) g_.graph.add_edge(last_dispatch_, id);
    const size_t gpu = last_on_[size_t(Stream::gpu)];
    if (after_gpu && gpu != kNone) g_.graph.add_edge(gpu, id);
    last_dispatch_ = id;
    return id;
  }

  size_t node(const SimPhase& s, size_t src, int layer) {
    const size_t id = g_.graph.add_phase(s);
    g_.source.push_back(src);
    g_.layer.push_back(layer);
    return id;
  }
  size_t repeat(size_t of, size_t src, int layer) {
    const size_t id = g_.graph.add_repeat(of);
    g_.source.push_back(src);
    g_.layer.push_back(layer);
    return id;
  }

  // A phase (or a piece of one) on its stream, after its dispatch when there is one. `piece`: for a
  // per-layer phase, which node of it this is (0 whole, 1 lead, 2 rest): every layer's is the same
  // phase, laid out once and repeated (StepGraph::add_repeat); -1 for a once-per-step phase.
  size_t add(const Phase& p, const SimPhase& s, size_t src, int layer, double host_s, bool sync = false, int piece = -1) {
    const size_t slot = piece >= 0 ? 3 * src + size_t(piece) : kNone;
    const size_t issued = m_.has_dispatch()
                              ? dispatch("dispatch ", s.name, host_s, layer, sync, slot != kNone ? &first_dispatch_[slot] : nullptr)
                              : kNone;
    size_t id;
    if (slot != kNone && first_[slot] != kNone) {
      id = repeat(first_[slot], src, layer);
    } else {
      id = node(s, src, layer);
      if (slot != kNone) first_[slot] = id;
    }
    if (issued != kNone) g_.graph.add_edge(issued, id);
    size_t& prev = last_on_[size_t(p.stream)];
    if (prev != kNone) g_.graph.add_edge(prev, id);
    prev = id;
    return id;
  }

  // A per-layer policy phase: {its first node, its last node}. At the layer's sync (sync_at_) it is
  // cut in two when it has a lead: the concatenating KV append runs, the host waits for it, then
  // issues the attention kernel.
  std::pair<size_t, size_t> add_policy_phase(size_t i, int l) {
    const Phase& p = pol_[i];
    const bool pre = sync_at_ != kNone && i < sync_at_;
    const double per_launch = pre ? per_launch_pre_ : per_launch_post_;
    if (i != sync_at_) {
      const size_t id = add(p, per_layer(i), i, l, per_launch * launches_of(p), false, 0);
      return {id, id};
    }
    const SimPhase& whole = per_layer(i);
    if (!(p.lead_fraction > 0)) {
      const size_t id = add(p, whole, i, l, per_launch * launches_of(p), true, 0);
      return {id, id};
    }
    const double lead_l = lead_launches(p), all_l = launches_of(p);
    const double f_lat = all_l > 0 ? lead_l / all_l : 0;
    // The pieces are made for the first layer only; later layers repeat its nodes.
    const bool made = first_[3 * i + 1] != kNone;
    const size_t lead = add(p, made ? whole : piece(whole, " (kv append)", p.lead_fraction, f_lat), i, l,
                            per_launch_pre_ * lead_l, false, 1);
    const size_t rest = add(p, made ? whole : piece(whole, "", 1 - p.lead_fraction, 1 - f_lat), i, l,
                            per_launch_post_ * (all_l - lead_l), true, 2);
    return {lead, rest};
  }

  void add_layer(int l) {
    const size_t np = pol_.size();
    const double qkv_share = (sync_at_ != kNone ? per_launch_pre_ : per_launch_post_) * launches_of(dense_[qkv_]);
    const size_t q = add(dense_[qkv_], per_layer(np + qkv_), np + qkv_, l, qkv_share, false, 0);
    std::vector<size_t>& node_of = node_of_;  // reused: no allocation per layer
    node_of.assign(np, kNone);
    for (size_t i = 0; i < np; ++i) {
      if (pol_[i].repeat <= 1) continue;
      const auto [first, last] = add_policy_phase(i, l);
      node_of[i] = last;
      g_.graph.add_edge(q, first);  // the phase (its first piece) needs the layer's q/k/v
      for (int8_t a : pol_[i].after) {
        if (a < 0) continue;
        if (size_t(a) >= np || node_of[size_t(a)] == kNone || size_t(a) == i)
          throw std::invalid_argument("decode graph: phase " + std::string(pol_[i].name) + " waits for an unknown phase");
        g_.graph.add_edge(node_of[size_t(a)], last);  // what it names feeds the attention kernel, not a lead append
      }
    }
    bool first_post = true;
    for (size_t i = 0; i < dense_.size(); ++i) {
      if (i == qkv_ || dense_[i].repeat <= 1) continue;
      const size_t id = add(dense_[i], per_layer(np + i), np + i, l, per_launch_post_ * launches_of(dense_[i]), false, 0);
      if (first_post) {
        for (size_t k = 0; k < np; ++k)
          if (pol_[k].repeat > 1 && !pol_[k].detached && pol_[k].stream != Stream::gpu) g_.graph.add_edge(node_of[k], id);
        first_post = false;
      }
    }
  }

  const std::vector<Phase>& pol_;
  const std::vector<Phase>& dense_;
  const Machine& m_;
  DecodeGraph& g_;
  size_t qkv_ = 0, sync_at_ = kNone;
  size_t last_on_[size_t(Stream::count)];
  size_t last_dispatch_ = kNone;
  std::vector<size_t> node_of_;  // the layer's last node of each policy phase (add_layer)
  std::vector<SimPhase> sims_;   // per_layer's conversions; an empty amount: not converted yet
  SimPhase dispatch_;            // dispatch()'s node, refilled for each
  // Per (source, piece: whole, lead, rest): the first layer's node of a per-layer phase, and of its
  // dispatch, which later layers repeat.
  std::vector<size_t> first_, first_dispatch_;
  double per_launch_pre_ = 0, per_launch_post_ = 0, per_launch_step_ = 0;
};
}  // namespace

DecodeGraph build_decode_graph(const std::vector<Phase>& pol, const std::vector<Phase>& dense, int layers,
                               const Machine& m) {
  DecodeGraph g{size_t(Resource::count)};  // braces: clang reads the parenthesized form as a function declaration
  Builder(pol, dense, m, g).build(layers);
  return g;
}

void build_decode_graph(DecodeGraph& into, const std::vector<Phase>& pol, const std::vector<Phase>& dense, int layers,
                        const Machine& m) {
  into.graph.reset();
  into.source.clear();
  into.layer.clear();
  Builder(pol, dense, m, into).build(layers);
}

}  // namespace kvsim::sim
