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

// One instance of a phase whose work is the total of `repeat` instances, into `into`.
void instance(const Phase& p, const Machine& m, SimPhase& into) {
  if (!(p.repeat > 1)) return to_sim_phase(p, m, into);
  Phase one = p;
  const double k = 1.0 / p.repeat;
  Work& w = one.work;
  w.flops *= k, w.hbm_bytes *= k, w.dram_bytes *= k, w.h2d_bytes *= k, w.d2h_bytes *= k;
  w.link_bytes *= k, w.launches *= k;
  one.repeat = 1;  // one instance now: a `bytes` efficiency curve must see this instance's bytes, as the roofline does
  to_sim_phase(one, m, into);
}

// The GPU kernels of one instance (gpu_launches): a host phase's host calls (Phase::lanes) are not
// operators the host dispatches.
double launches_of(const Phase& p) { return gpu_launches(p) / std::max(1.0, double(p.repeat)); }

// The kernels of a phase with a lead piece (Phase::lead_fraction): all but the last for the lead.
double lead_launches(const Phase& p) { return std::max(0.0, launches_of(p) - 1); }

// A piece of a simulated phase: `f` of its amount on every resource and `f_latency` of its latency,
// so that the lead and the rest alone take exactly the phase's roofline time together.
void to_piece(SimPhase& s, const char* suffix, double f, double f_latency) {
  s.name += suffix;
  for (double& a : s.amount) a *= f;
  s.latency *= f_latency;
}

// Which node of a phase: a once-per-step phase's, or a per-layer phase whole, or the lead or the rest
// of one cut at the layer's sync (Phase::lead_fraction).
enum class Piece : int8_t { step = -1, whole = 0, lead = 1, rest = 2 };
const char* suffix(Piece k) { return k == Piece::lead ? " (kv append)" : ""; }

// The simulated phase of a node of `p`, into `s` (a layout, and a refill of it: build_decode_graph).
void fill(const Phase& p, Piece k, const Machine& m, SimPhase& s) {
  instance(p, m, s);
  if (k != Piece::lead && k != Piece::rest) return;
  const double lead_l = lead_launches(p), all_l = launches_of(p);
  const double f_lat = all_l > 0 ? lead_l / all_l : 0;
  if (k == Piece::lead) to_piece(s, suffix(k), p.lead_fraction, f_lat);
  else to_piece(s, suffix(k), 1 - p.lead_fraction, 1 - f_lat);
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
    for (auto* f : {&first_, &first_dispatch_}) f->assign(3 * (pol.size() + dense.size()), kNone);
  }

  void build(int layers) {
    // The step's operators issued before the first layer (Machine::dispatch_step_pre_s).
    if (m_.dispatch_step_pre_s > 0) dispatch("dispatch step (before the layers)", "", "", m_.dispatch_step_pre_s, -1);
    // Once-per-step policy phases (e.g. CHESS's selection) run before the first layer.
    for (size_t i = 0; i < pol_.size(); ++i)
      if (pol_[i].repeat <= 1) add(pol_[i], Piece::step, i, -1, step_share(pol_[i]));
    for (int l = 0; l < layers; ++l) add_layer(l);
    for (size_t i = 0; i < dense_.size(); ++i)
      if (dense_[i].repeat <= 1) add(dense_[i], Piece::step, pol_.size() + i, -1, step_share(dense_[i]));
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

  // A host dispatch node named `prefix` + `name`, chained after the previous one; `after_gpu` also makes
  // it wait for the last kernel issued on the GPU's main stream (a host-device sync). `first`: where a
  // node issuing the same phase in another layer is kept (it is repeated, add_repeat), or null.
  size_t dispatch(const char* prefix, std::string_view name, const char* name_suffix, double host_s, int layer,
                  bool after_gpu = false, size_t* first = nullptr) {
    if (!m_.has_dispatch() || !(host_s > 0 || after_gpu)) return kNone;  // a sync holds the host even with nothing to issue
    size_t id;
    if (first && *first != kNone) {
      id = repeat(*first, kNone, layer);
    } else {
      SimPhase* d;
      std::tie(id, d) = node(kNone, layer);
      d->name.assign(prefix).append(name).append(name_suffix);
      d->latency = d->min_seconds = 0;
      d->amount.assign(size_t(Resource::count), 0.0);
      d->amount[size_t(Resource::host_dispatch)] = std::max(0.0, host_s);
      if (first) *first = id;
    }
    if (last_dispatch_ != kNone) edge(last_dispatch_, id);
    const size_t gpu = last_on_[size_t(Stream::gpu)];
    if (after_gpu && gpu != kNone) edge(gpu, id);
    last_dispatch_ = id;
    return id;
  }

  // A new node, whose phase the caller fills in place (StepGraph::emplace_phase).
  std::pair<size_t, SimPhase*> node(size_t src, int layer) {
    const auto made = g_.graph.emplace_phase();
    g_.source.push_back(src);
    g_.layer.push_back(layer);
    return made;
  }
  size_t repeat(size_t of, size_t src, int layer) {
    const size_t id = g_.graph.add_repeat(of);
    g_.source.push_back(src);
    g_.layer.push_back(layer);
    return id;
  }
  void edge(size_t before, size_t after) { g_.graph.add_edge(before, after); }

  // A phase (or a piece of one) on its stream, after its dispatch when there is one. `piece`: for a
  // per-layer phase, which node of it this is (0 whole, 1 lead, 2 rest): every layer's is the same
  // phase, laid out once and repeated (StepGraph::add_repeat); -1 for a once-per-step phase.
  size_t add(const Phase& p, Piece k, size_t src, int layer, double host_s, bool sync = false) {
    const size_t slot = k != Piece::step ? 3 * src + size_t(k) : kNone;
    const size_t issued =
        m_.has_dispatch()
            ? dispatch("dispatch ", p.name, suffix(k), host_s, layer, sync, slot != kNone ? &first_dispatch_[slot] : nullptr)
            : kNone;
    size_t id;
    if (slot != kNone && first_[slot] != kNone) {
      id = repeat(first_[slot], src, layer);
    } else {
      SimPhase* s;
      std::tie(id, s) = node(src, layer);
      fill(p, k, m_, *s);
      g_.scratch.fills.push_back({id, src, int8_t(k)});  // what a refill of this layout fills again
      if (slot != kNone) first_[slot] = id;
    }
    if (issued != kNone) edge(issued, id);
    size_t& prev = last_on_[size_t(p.stream)];
    if (prev != kNone) edge(prev, id);
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
      const size_t id = add(p, Piece::whole, i, l, per_launch * launches_of(p));
      return {id, id};
    }
    if (!(p.lead_fraction > 0)) {
      const size_t id = add(p, Piece::whole, i, l, per_launch * launches_of(p), true);
      return {id, id};
    }
    const double lead_l = lead_launches(p), all_l = launches_of(p);
    const size_t lead = add(p, Piece::lead, i, l, per_launch_pre_ * lead_l);
    const size_t rest = add(p, Piece::rest, i, l, per_launch_post_ * (all_l - lead_l), true);
    return {lead, rest};
  }

  void add_layer(int l) {
    const size_t np = pol_.size();
    const double qkv_share = (sync_at_ != kNone ? per_launch_pre_ : per_launch_post_) * launches_of(dense_[qkv_]);
    const size_t q = add(dense_[qkv_], Piece::whole, np + qkv_, l, qkv_share);
    std::vector<size_t>& node_of = node_of_;  // reused: no allocation per layer
    node_of.assign(np, kNone);
    for (size_t i = 0; i < np; ++i) {
      if (pol_[i].repeat <= 1) continue;
      const auto [first, last] = add_policy_phase(i, l);
      node_of[i] = last;
      edge(q, first);  // the phase (its first piece) needs the layer's q/k/v
      for (int8_t a : pol_[i].after) {
        if (a < 0) continue;
        if (size_t(a) >= np || node_of[size_t(a)] == kNone || size_t(a) == i)
          throw std::invalid_argument("decode graph: phase " + std::string(pol_[i].name) + " waits for an unknown phase");
        edge(node_of[size_t(a)], last);  // what it names feeds the attention kernel, not a lead append
      }
    }
    bool first_post = true;
    for (size_t i = 0; i < dense_.size(); ++i) {
      if (i == qkv_ || dense_[i].repeat <= 1) continue;
      const size_t id = add(dense_[i], Piece::whole, np + i, l, per_launch_post_ * launches_of(dense_[i]));
      if (first_post) {
        for (size_t k = 0; k < np; ++k)
          if (pol_[k].repeat > 1 && !pol_[k].detached && pol_[k].stream != Stream::gpu) edge(node_of[k], id);
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
  // Kept in the graph from layout to layout (DecodeGraph::scratch): no allocation per step.
  // node_of_: the layer's last node of each policy phase (add_layer). first_, first_dispatch_: per
  // (source, piece: whole, lead, rest), the first layer's node of a per-layer phase, and of its
  // dispatch, which later layers repeat.
  std::vector<size_t>& node_of_ = g_.scratch.node_of;
  std::vector<size_t>& first_ = g_.scratch.first;
  std::vector<size_t>& first_dispatch_ = g_.scratch.first_dispatch;
  double per_launch_pre_ = 0, per_launch_post_ = 0, per_launch_step_ = 0;
};

// What the layout's nodes and edges depend on: the phases' names, per-layer or per-step, streams,
// dependencies, lead pieces; the layers; the implementation's syncs. Not the work, which only fills
// the nodes' phases -- except through an eager implementation's dispatch nodes, which exist only
// where there is something to issue: such a layout is never refilled.
void layout_shape(const std::vector<Phase>& pol, const std::vector<Phase>& dense, int layers, const Machine& m,
                  DecodeGraph::Shape& out) {
  out.layers = layers;
  out.n_policy = pol.size();
  out.sync_per_layer = m.sync_per_layer;
  out.refillable = !m.has_dispatch();
  out.phases.clear();
  for (const auto* list : {&pol, &dense})
    for (const Phase& p : *list)
      out.phases.push_back({p.name, p.kind, p.stream, p.after, p.repeat > 1, p.detached, p.lead_fraction > 0});
}

}  // namespace

bool DecodeGraph::Shape::PhaseShape::operator==(const PhaseShape&) const = default;
bool DecodeGraph::Shape::operator==(const Shape&) const = default;

DecodeGraph build_decode_graph(const std::vector<Phase>& pol, const std::vector<Phase>& dense, int layers,
                               const Machine& m) {
  DecodeGraph g{size_t(Resource::count)};  // braces: clang reads the parenthesized form as a function declaration
  layout_shape(pol, dense, layers, m, g.shape);
  Builder(pol, dense, m, g).build(layers);
  return g;
}

void build_decode_graph(DecodeGraph& into, const std::vector<Phase>& pol, const std::vector<Phase>& dense, int layers,
                        const Machine& m) {
  DecodeGraph::Shape& next = into.scratch.next_shape;
  layout_shape(pol, dense, layers, m, next);
  if (next.refillable && into.graph.size() > 0 && next == into.shape) {
    // The same nodes and edges: only the phases the layout converted change (the repeats follow).
    for (const DecodeGraph::Fill& f : into.scratch.fills)
      fill(f.source < pol.size() ? pol[f.source] : dense[f.source - pol.size()], Piece(f.piece), m,
           into.graph.refill_phase(f.node));
    return;
  }
  std::swap(into.shape, next);
  into.graph.reset();
  into.source.clear();
  into.layer.clear();
  into.scratch.fills.clear();
  Builder(pol, dense, m, into).build(layers);
}

}  // namespace kvsim::sim
