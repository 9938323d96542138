// sekv (seed 003, SEKV: resolution-adaptive KV cache with hierarchical semantic memory).
// Prefill (§3.1-3.2): surprisal H_t > mu + alpha sigma marks span boundaries; boundary (anchor)
// tokens and spans shorter than L_min stay at full resolution on the GPU, with a local window of w
// recent tokens. Per span and layer: a routing summary of d' per query head (eq. 3), a
// surprisal-weighted mean key and value per KV head (the span's coarse entry), and a truncated SVD of
// rank r <= R_max of its K and V per KV head, stored on the CPU (App. D eq. 18:
// 2 L Hkv r (|S| + d + 1) b bytes per span).
// Surprisal (§3.1, eq. 1) needs the model's prediction at every prompt position, so prefill runs the
// LM head over the whole prompt, not only the last position.
// Decode (§3.3, Fig. 2): route — project q to d' and score every span summary, sigmoid(q K / sqrt(d')
// + log|S|) — then threshold and cap to the GPU-resident budget; fetch the zoomed spans' factors
// CPU -> GPU (asynchronous: it overlaps the stage-1 attention over anchors, local window and coarse
// entries); reconstruct U S V^T; stage-2 attention over the reconstructed tokens, merged into the same
// softmax.
// Stand-ins for trained parts (documented in docs/cost-model.md): the routing projection is a fixed
// d' x d matrix per head; the zoom threshold sets no rate of its own: by default the zoomed spans fill
// the budget (§3.3, §4.1: spans in decreasing routing score until the budget is reached), and
// zoom_rate >= 0 overrides that with a fixed fraction of compressed tokens, still capped by the budget;
// the learned per-span rank is rank_ratio.
#include "core/format.hpp"
#include "policies/blocks.hpp"
#include "model/policy.hpp"
#include "model/transformer.hpp"
#include "policies/sekv/params.hpp"
#include "policies/sekv/policy.hpp"

namespace kvsim::policies::sekv {

namespace {

class SekvPolicy final : public Policy {
 public:
  std::string_view name() const override { return "sekv"; }
  std::string_view summary() const override {
    return "surprisal spans: summaries + anchors on GPU, low-rank factors on CPU, zoom-in fetch per step (seed 003)";
  }
  const std::vector<ParamSpec>& params() const override { return param_table().specs(); }
  const std::vector<BudgetKnob>& budget_knobs() const override { return param_table().knobs(); }

  struct Layout {
    double full_tokens;   // anchors + short spans + local window (prompt part), full resolution on GPU
    double comp_tokens;   // tokens inside compressed spans
    double spans;         // compressed spans m
    double rank;          // mean effective rank r
    double span_bytes;    // CPU bytes of one span's factors, per layer and KV head (K and V)
    double budget;        // GPU-resident budget beta P, token-equivalents per layer and KV head
    double room;          // what the budget leaves for reconstruction (reconstruction_room; < 0: overrun)
    double zoom_spans;    // spans zoomed per step, per layer and KV head
    double zoom_tokens;   // tokens reconstructed per step, per layer and KV head
  };
  static Layout layout(const Deployment& d, const Params& p, double prompt) {
    const auto s = blocks::shape(d);
    Layout o;
    const double local = std::min(prompt, p.local_window);
    const double rest = prompt - local;
    o.full_tokens = local + p.anchor_ratio * rest;
    o.comp_tokens = rest - p.anchor_ratio * rest;
    o.spans = o.comp_tokens > 0 ? std::ceil(o.comp_tokens / p.mean_span_tokens) : 0;
    const double span = p.mean_span_tokens;
    o.rank = std::max(1.0, std::round(p.rank_ratio * std::min({span, s.hd, p.max_rank})));
    o.span_bytes = 2 * o.rank * (span + s.hd + 1) * s.bkv;
    // GPU budget in token-equivalents per layer and KV head (one token = one K and one V row).
    o.budget = p.budget_ratio * prompt;
    o.room = reconstruction_room(p, prompt, o.full_tokens, o.spans, s.group, s.hd);
    const double room = std::max(0.0, o.room);
    if (p.zoom_rate < 0) {
      // Fill the budget (§3.3, §4.1): whole spans of the mean length, as many as fit in the room (a
      // span is never split), at most every span.
      o.zoom_spans = std::min(o.spans, std::floor(room / span + 1e-9));
      o.zoom_tokens = std::min(o.comp_tokens, o.zoom_spans * span);
    } else {
      // Override: a fixed fraction of the compressed tokens, capped by the room.
      o.zoom_tokens = std::min(p.zoom_rate * o.comp_tokens, room);
      o.zoom_spans = o.zoom_tokens / span;
    }
    return o;
  }
  // "No room to zoom" (§3.3: the budget counts anchors, summaries and coarse means before any zoomed
  // span) and an override capped by the budget.
  void notes(const Deployment& d, const ParamValues& values, double prompt, double, std::vector<std::string>& out)
      const override {
    const Params p = param_table().read(values);
    const Layout o = layout(d, p, prompt);
    const auto tok = [](double x) { return fmt("%.0f", x); };
    const double local = std::min(prompt, p.local_window), resident = o.budget - o.room;
    const std::string budget = "the GPU-resident budget (budget_ratio " + fmt("%g", p.budget_ratio) + " x " +
                               tok(prompt) + " = " + tok(o.budget) + " tokens per layer and KV head)";
    const std::string coarse = "; every compressed span stays coarse";
    const std::string over = " and the resident set is " + fmt("%.2f", resident / o.budget) + "x the budget";
    if (o.full_tokens > o.budget) {
      out.push_back("no room to zoom: the full-resolution set alone (local window " + tok(local) +
                    " + anchors and short spans " + tok(o.full_tokens - local) + " = " + tok(o.full_tokens) +
                    " tokens) exceeds " + budget + coarse + over);
    } else if (o.comp_tokens > 0 && o.room <= 0) {
      out.push_back("no room to zoom: the full-resolution set (" + tok(o.full_tokens) + " tokens) fits in " + budget +
                    ", but not with the coarse entries and routing summaries of its " + tok(o.spans) + " spans (" +
                    tok(resident - o.full_tokens) + " token-equivalents)" + coarse + over);
    } else if (o.comp_tokens > 0 && p.zoom_rate < 0 && o.zoom_spans <= 0) {
      out.push_back("no room to zoom: " + budget + " leaves " + tok(o.room) +
                    " token-equivalents after the full-resolution set, coarse entries and routing summaries, less "
                    "than one span of " + fmt("%g", p.mean_span_tokens) + " tokens" + coarse);
    } else if (p.zoom_rate >= 0 && p.zoom_rate * o.comp_tokens > std::max(0.0, o.room)) {
      out.push_back("zoom_rate " + fmt("%g", p.zoom_rate) + " asks for " + tok(p.zoom_rate * o.comp_tokens) +
                    " reconstructed tokens per step, layer and KV head; " + budget + " leaves room for " +
                    tok(std::max(0.0, o.room)) + ": capped there");
    }
  }
  MemoryDemand memory(const Deployment& d, const ParamValues& values, double prompt, double output) const override {
    const Params p = param_table().read(values);
    const auto s = blocks::shape(d);
    const Layout o = layout(d, p, prompt);
    MemoryDemand m;
    // Full-resolution tokens and generated tokens; coarse k-bar, v-bar (one token-equivalent per span);
    // routing summaries (d' per query head); one layer's reconstructed tokens (transient per layer).
    m.kv_hbm_per_seq = (o.full_tokens + output + o.spans) * d.kv_bytes_per_token();
    m.hbm_per_seq = m.kv_hbm_per_seq + o.spans * s.L * s.hq * p.routing_dim * s.bkv + o.zoom_tokens * s.kv_row;
    m.hbm_fixed = blocks::prompt_layer_kv(d, prompt) + s.L * s.hq * p.routing_dim * s.hd * d.ba;  // + projections W
    m.kv_dram_per_seq = o.spans * s.L * s.hkv * o.span_bytes;  // eq. 19
    m.dram_per_seq = m.kv_dram_per_seq;
    return m;
  }
  void prefill(const Deployment& d, const ParamValues& values, double prompt, PhaseList& out) const override {
    const Params p = param_table().read(values);
    const auto s = blocks::shape(d);
    const Layout o = layout(d, p, prompt);
    // Routing summaries: project every key to d' per query head, surprisal-weighted means of K and V.
    Phase sum{"span_summaries", PhaseKind::build, Device::gpu, ComputeUnit::tensor_act, {}};
    sum.work.flops = s.L * (s.hq * prompt * s.hd * p.routing_dim * 2 + s.hkv * prompt * s.hd * 4);
    sum.work.hbm_bytes = s.L * (2 * s.hkv * prompt * s.key_row + o.spans * (s.hq * p.routing_dim + 2 * s.hkv * s.hd) * s.bkv);
    sum.work.launches = s.L * 3;
    out.push_back(sum);
    // Randomized truncated SVD of each span's K and V per KV head (sketch k = r + 8, one power
    // iteration): ~8 |S| d k + 4 |S| k^2 FLOPs per matrix, three passes over the span.
    const double span = p.mean_span_tokens, k = std::min(o.rank + 8, std::min(span, s.hd));
    Phase svd{"span_svd", PhaseKind::build, Device::gpu, ComputeUnit::tensor_act, {}};
    svd.work.flops = s.L * s.hkv * 2 * o.spans * (8 * span * s.hd * k + 4 * span * k * k);
    svd.work.hbm_bytes = s.L * s.hkv * 2 * o.spans * (3 * span * s.key_row) + s.L * s.hkv * o.spans * o.span_bytes;
    svd.work.launches = s.L * 6;
    out.push_back(svd);
    out.push_back(blocks::copy("offload_factors", false, 1, s.hkv * o.spans * o.span_bytes, 0, s.L));
    // Surprisal H_t = -log p(x_t | x_<t) for t = 1..P-1 (§3.1, eq. 1) needs the logits at positions
    // 0..P-2; the shared prefill_lm_head computes only the last position's (for the first output token).
    // The LM head reads its weights once per prefill chunk, as prefill_gemm does.
    const double h = d.model->hidden, rows = std::max(0.0, prompt - 1);
    const double chunks = std::ceil(prompt / d.prefill_chunk(prompt));
    Phase head = weight_gemm("surprisal_lm_head", d, rows, h, d.vocab, 1, chunks);
    head.work.hbm_bytes += (chunks - 1) * h * d.vocab * d.bw;
    out.push_back(head);
    // Log-softmax at the observed token: read each row's logits (max, exp, sum: ~4 FLOPs per logit),
    // read the token id and write H_t (4 bytes each).
    Phase sur{"surprisal", PhaseKind::elementwise, Device::gpu, ComputeUnit::simt, {}};
    sur.work.flops = rows * d.vocab * 4;
    sur.work.hbm_bytes = rows * (d.vocab * d.ba + 8);
    sur.work.launches = chunks;
    out.push_back(sur);
  }
  void decode_attention(const Deployment& d, const ParamValues& values, const StepShape& st, PhaseList& out) const override {
    const Params p = param_table().read(values);
    const auto s = blocks::shape(d);
    const Layout o = layout(d, p, st.prompt);
    const double B = st.batch, dp = p.routing_dim;
    // 0: route — project q (d' x d per query head) and score the m summaries of d'.
    Phase route = blocks::score(d, "route", B, s.hq, s.hq, o.spans, dp, s.bkv, s.L);
    route.work.flops += s.L * B * s.hq * 2 * dp * s.hd;
    route.work.hbm_bytes += s.L * s.hq * dp * s.hd * d.ba;  // the projections W, read once per step
    out.push_back(route);
    // 1: threshold, then cap to the budget in decreasing routing score.
    // The budget and the "complete span" test read each span's length and end once per call, shared by
    // every head (docs/validation/phase-bytes.md, rule 4).
    Phase zoom = blocks::select("zoom_select", B, s.hq, o.spans, o.zoom_spans, s.L);
    zoom.work.hbm_bytes += s.L * B * o.spans * 8;
    out.push_back(zoom);
    // 2: fetch the zoomed spans' factors (one contiguous block per span and matrix).
    Phase fetch = blocks::copy("fetch_factors", true, B, s.hkv * o.zoom_spans * o.span_bytes,
                               o.span_bytes / 2, s.L);
    fetch.after = {1, -1, -1};
    out.push_back(fetch);
    // 3: stage 1 — anchors, local window, generated tokens and one coarse entry per span (+log|S|).
    out.push_back(blocks::attention(d, "coarse_attention", B, o.full_tokens + st.generated + o.spans, 0, true));
    // 4: reconstruct U S V^T for K and V of the zoomed spans.
    Phase rec = blocks::layer_phase("reconstruct", PhaseKind::reconstruct, Device::gpu, ComputeUnit::tensor_act,
                                    Stream::gpu, s.L);
    rec.work.flops = s.L * B * s.hkv * 2 * o.zoom_tokens * o.rank * s.hd * 2;
    rec.work.hbm_bytes = s.L * B * s.hkv * (o.zoom_spans * o.span_bytes + o.zoom_tokens * 2 * s.key_row);
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

const Policy& cost_model() {
  static const SekvPolicy p;
  return p;
}

}  // namespace kvsim::policies::sekv
