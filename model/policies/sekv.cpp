// sekv (seed 003, SEKV: resolution-adaptive KV cache with hierarchical semantic memory).
// Prefill (§3.1-3.2): surprisal H_t > mu + alpha sigma marks span boundaries; boundary (anchor)
// tokens and spans shorter than L_min stay at full resolution on the GPU, with a local window of w
// recent tokens. Per span and layer: a routing summary of d' per query head (eq. 3), a
// surprisal-weighted mean key and value per KV head (the span's coarse entry), and a truncated SVD of
// rank r <= R_max of its K and V per KV head, stored on the CPU (App. D eq. 18:
// 2 L Hkv r (|S| + d + 1) b bytes per span).
// Decode (§3.3, Fig. 2): route — project q to d' and score every span summary, sigmoid(q K / sqrt(d')
// + log|S|) — then threshold and cap to the GPU-resident budget; fetch the zoomed spans' factors
// CPU -> GPU (asynchronous: it overlaps the stage-1 attention over anchors, local window and coarse
// entries); reconstruct U S V^T; stage-2 attention over the reconstructed tokens, merged into the same
// softmax.
// Stand-ins for trained parts (documented in docs/cost-model.md): the routing projection is a fixed
// d' x d matrix per head; the zoom threshold is replaced by zoom_rate, the fraction of compressed
// spans' tokens expanded per step, capped by the budget; the learned per-span rank by rank_ratio.
#include "model/policies/blocks.hpp"
#include "model/policy.hpp"

namespace kvsim {

namespace {
enum P { kBudget, kRmax, kDprime, kAlpha, kLmin, kLocal, kSpan, kAnchor, kZoom, kRank };

class SekvPolicy final : public Policy {
 public:
  std::string_view name() const override { return "sekv"; }
  std::string_view summary() const override {
    return "surprisal spans: summaries + anchors on GPU, low-rank factors on CPU, zoom-in fetch per step (seed 003)";
  }
  const std::vector<ParamSpec>& params() const override {
    static const std::vector<ParamSpec> p = {
        {"budget_ratio", 0.1, Range{0, 1, true}, false,
         "GPU-resident budget as a fraction of the prompt's KV (token-equivalents per layer and KV head), anchors, coarse entries and summaries included (§4.1: 10%)"},
        {"max_rank", 32, Range::between(1, 4096), true, "R_max: SVD rank cap (§4.1, App. A: R = 32)"},
        {"routing_dim", 32, Range::between(1, 4096), true, "d': routing summary dimension (§3.2: d' = 32)"},
        {"alpha", 1.0, Range::between(0, 100), false,
         "boundary sensitivity: H_t > mu + alpha sigma (§3.1, Table 7: 1.0); used by trace replay, which measures anchor_ratio and mean_span_tokens"},
        {"min_span", 16, Range::between(1, 1e6), true, "L_min: shorter spans stay full resolution on the GPU (App. A: 16)"},
        {"local_window", 512, Range::between(0, 1e8), true, "w: recent tokens at full resolution (§4.1, Table 7: 512)"},
        {"mean_span_tokens", 32, Range::between(1, 1e6), false,
         "mean length of a compressed span (data-dependent: estimate; trace replay measures it)"},
        {"anchor_ratio", 0.03, Range::between(0, 1), false,
         "fraction of prompt tokens kept full resolution: anchors and spans shorter than L_min (estimate; trace replay measures it)"},
        {"zoom_rate", 0.005, Range::between(0, 1), false,
         "fraction of compressed tokens whose spans are zoomed per step, per layer and KV head (stand-in for the trained threshold; Fig. 5 shows zoom-in is sparse)"},
        {"rank_ratio", 0.5, Range{0, 1, true}, false,
         "mean effective rank as a fraction of min(|S|, d, R_max) (stand-in for the trained rank gates, §3.2 eq. 7-8)"},
    };
    return p;
  }

  struct Layout {
    double full_tokens;   // anchors + short spans + local window (prompt part), full resolution on GPU
    double comp_tokens;   // tokens inside compressed spans
    double spans;         // compressed spans m
    double rank;          // mean effective rank r
    double span_bytes;    // CPU bytes of one span's factors, per layer and KV head (K and V)
    double zoom_tokens;   // tokens reconstructed per step, per layer and KV head
  };
  static Layout layout(const Deployment& d, const ParamValues& p, double prompt) {
    const auto s = blocks::shape(d);
    Layout o;
    const double local = std::min(prompt, p[kLocal]);
    const double rest = prompt - local;
    o.full_tokens = local + p[kAnchor] * rest;
    o.comp_tokens = rest - p[kAnchor] * rest;
    o.spans = o.comp_tokens > 0 ? std::ceil(o.comp_tokens / p[kSpan]) : 0;
    const double span = p[kSpan];
    o.rank = std::max(1.0, std::round(p[kRank] * std::min({span, s.hd, p[kRmax]})));
    o.span_bytes = 2 * o.rank * (span + s.hd + 1) * s.bkv;
    // GPU budget in token-equivalents per layer and KV head (one token = one K and one V row).
    const double coarse = o.spans;                                    // one k-bar, v-bar per span
    const double summaries = o.spans * s.group * p[kDprime] / (2 * s.hd);  // d' per query head
    const double budget = p[kBudget] * prompt;
    const double room = std::max(0.0, budget - o.full_tokens - coarse - summaries);
    o.zoom_tokens = std::min(p[kZoom] * o.comp_tokens, room);
    return o;
  }
  MemoryDemand memory(const Deployment& d, const ParamValues& p, double prompt, double output) const override {
    const auto s = blocks::shape(d);
    const Layout o = layout(d, p, prompt);
    MemoryDemand m;
    // Full-resolution tokens and generated tokens; coarse k-bar, v-bar (one token-equivalent per span);
    // routing summaries (d' per query head); one layer's reconstructed tokens (transient per layer).
    m.kv_hbm_per_seq = (o.full_tokens + output + o.spans) * d.kv_bytes_per_token();
    m.hbm_per_seq = m.kv_hbm_per_seq + o.spans * s.L * s.hq * p[kDprime] * s.bkv + o.zoom_tokens * s.kv_row;
    m.hbm_fixed = blocks::prompt_layer_kv(d, prompt) + s.L * s.hq * p[kDprime] * s.hd * d.ba;  // + projections W
    m.kv_dram_per_seq = o.spans * s.L * s.hkv * o.span_bytes;  // eq. 19
    m.dram_per_seq = m.kv_dram_per_seq;
    return m;
  }
  void prefill(const Deployment& d, const ParamValues& p, double prompt, PhaseList& out) const override {
    const auto s = blocks::shape(d);
    const Layout o = layout(d, p, prompt);
    // Routing summaries: project every key to d' per query head, surprisal-weighted means of K and V.
    Phase sum{"span_summaries", PhaseKind::build, Device::gpu, ComputeUnit::tensor_act, {}};
    sum.work.flops = s.L * (s.hq * prompt * s.hd * p[kDprime] * 2 + s.hkv * prompt * s.hd * 4);
    sum.work.hbm_bytes = s.L * (2 * s.hkv * prompt * s.key_row + o.spans * (s.hq * p[kDprime] + 2 * s.hkv * s.hd) * s.bkv);
    sum.work.launches = s.L * 3;
    out.push_back(sum);
    // Randomized truncated SVD of each span's K and V per KV head (sketch k = r + 8, one power
    // iteration): ~8 |S| d k + 4 |S| k^2 FLOPs per matrix, three passes over the span.
    const double span = p[kSpan], k = std::min(o.rank + 8, std::min(span, s.hd));
    Phase svd{"span_svd", PhaseKind::build, Device::gpu, ComputeUnit::tensor_act, {}};
    svd.work.flops = s.L * s.hkv * 2 * o.spans * (8 * span * s.hd * k + 4 * span * k * k);
    svd.work.hbm_bytes = s.L * s.hkv * 2 * o.spans * (3 * span * s.key_row) + s.L * s.hkv * o.spans * o.span_bytes;
    svd.work.launches = s.L * 6;
    out.push_back(svd);
    out.push_back(blocks::copy("offload_factors", false, 1, s.hkv * o.spans * o.span_bytes, 0, s.L));
  }
  void decode_attention(const Deployment& d, const ParamValues& p, const StepShape& st, PhaseList& out) const override {
    const auto s = blocks::shape(d);
    const Layout o = layout(d, p, st.prompt);
    const double B = st.batch, dp = p[kDprime];
    // 0: route — project q (d' x d per query head) and score the m summaries of d'.
    Phase route = blocks::score(d, "route", B, s.hq, s.hq, o.spans, dp, s.bkv, s.L);
    route.work.flops += s.L * B * s.hq * 2 * dp * s.hd;
    route.work.hbm_bytes += s.L * s.hq * dp * s.hd * d.ba;  // the projections W, read once per step
    out.push_back(route);
    // 1: threshold, then cap to the budget in decreasing routing score.
    out.push_back(blocks::select("zoom_select", B, s.hq, o.spans, o.spans * p[kZoom], s.L));
    // 2: fetch the zoomed spans' factors (one contiguous block per span and matrix).
    const double zoomed_spans = o.zoom_tokens / p[kSpan];
    Phase fetch = blocks::copy("fetch_factors", true, B, s.hkv * zoomed_spans * o.span_bytes,
                               o.span_bytes / 2, s.L);
    fetch.after = {1, -1, -1};
    out.push_back(fetch);
    // 3: stage 1 — anchors, local window, generated tokens and one coarse entry per span (+log|S|).
    out.push_back(blocks::attention(d, "coarse_attention", B, o.full_tokens + st.generated + o.spans, 0, true));
    // 4: reconstruct U S V^T for K and V of the zoomed spans.
    Phase rec = blocks::layer_phase("reconstruct", PhaseKind::reconstruct, Device::gpu, ComputeUnit::tensor_act,
                                    Stream::gpu, s.L);
    rec.work.flops = s.L * B * s.hkv * 2 * o.zoom_tokens * o.rank * s.hd * 2;
    rec.work.hbm_bytes = s.L * B * s.hkv * (zoomed_spans * o.span_bytes + o.zoom_tokens * 2 * s.key_row);
    rec.work.launches = s.L;
    rec.after = {2, -1, -1};
    out.push_back(rec);
    // 5: stage 2 — attention over the reconstructed tokens, merged with stage 1.
    Phase fine = blocks::attention(d, "fine_attention", B, o.zoom_tokens, 0, false);
    fine.work.flops += s.L * B * s.hq * s.hd * 4;  // merge of the two partial softmax states
    out.push_back(fine);
  }
};
}  // namespace

const Policy& sekv_policy() {
  static const SekvPolicy p;
  return p;
}

}  // namespace kvsim
