// sekv trace selector (seed 003, SEKV). Reading of the paper: docs/selectors.md, "## sekv".
// Prefill (§3.1-3.2): surprisal boundaries H_t > mu + alpha sigma (mu, sigma over the whole prompt,
// §3.1 "over the sequence") are anchors; the runs between anchors are spans; spans shorter than L_min
// and the last w prompt tokens stay full resolution; every other span gets, per (layer, KV head), a
// routing summary (eq. 3, PCA projection as the untrained stand-in for W), surprisal-weighted coarse
// means k-bar, v-bar (eq. 2), and truncated SVDs of K_S and V_S (eq. 6; rank by spectral energy capped by
// min(|S|, d, R_max), the stand-in for the rank gates of eq. 7-8).
// Decode (§3.3): routing gate sigmoid(q' K-bar / sqrt(d') + log|S|) (eq. 5) per query head, max over the
// GQA group; threshold (stand-in tau) then the budget cap in decreasing score; zoomed spans enter as
// reconstructed tokens (bias 0), the others as one coarse entry with bias log|S|; anchors, short spans,
// the local window and generated tokens as full-resolution tokens.
#include "policies/sekv/selector.hpp"
#include "policies/sekv/params.hpp"
#include "policies/sekv/policy.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

#include "core/parallel.hpp"
#include "kernels/reference/reference.hpp"

namespace kvsim::policies::sekv {
using namespace kvsim::replay;

SekvSelector::SekvSelector(const ParamValues& p, SekvOptions o) : p_(param_table().read(p)), o_(o) {}

// ---- segmentation (§3.1), shared by every layer and head: anchors where surprisal exceeds mu + alpha
// sigma, spans between them (or fixed chunks without surprisal), and the full-resolution token set ----
void SekvSelector::segment(const std::vector<float>& sur) {
  const double alpha = p_.alpha;
  const int64_t lmin = std::max<int64_t>(1, int64_t(std::llround(p_.min_span)));
  const int64_t w = std::min<int64_t>(P_, int64_t(std::llround(p_.local_window)));
  no_surprisal_ = int64_t(sur.size()) < P_;
  std::vector<uint8_t> is_anchor(size_t(P_), 0);
  anchors_.clear();
  if (!no_surprisal_ && P_ > 1) {
    // mu, sigma over the prompt's tokens 1..P-1 (token 0 has no surprisal; the trace stores 0 there).
    double s1 = 0, s2 = 0;
    const int64_t n = P_ - 1;
    for (int64_t t = 1; t < P_; ++t) s1 += sur[size_t(t)];
    mu_ = s1 / double(n);
    for (int64_t t = 1; t < P_; ++t) s2 += (sur[size_t(t)] - mu_) * (sur[size_t(t)] - mu_);
    sigma_ = std::sqrt(s2 / double(n));
    const double thr = mu_ + alpha * sigma_;
    for (int64_t t = 1; t < P_; ++t)
      if (double(sur[size_t(t)]) > thr) {
        is_anchor[size_t(t)] = 1;
        anchors_.push_back(int32_t(t));
      }
  }
  boundary_count_ = int64_t(anchors_.size());
  spans_.clear();
  full_.clear();
  short_tokens_ = 0;
  const int64_t comp_end = P_ - w;  // tokens [comp_end, P) are the local window
  if (no_surprisal_) {
    // No surprisal in the trace: fixed chunks of mean_span_tokens (at least L_min) tokens, as the
    // paper's "w/o entropy-guided segmentation" ablation does (App. C), with uniform weights.
    const int64_t c = std::max<int64_t>(lmin, int64_t(std::llround(p_.mean_span_tokens)));
    for (int64_t b = 0; b < comp_end; b += c) {
      const int64_t e = std::min(comp_end, b + c);
      if (e - b >= lmin) {
        spans_.push_back({int32_t(b), int32_t(e)});
      } else {
        for (int64_t t = b; t < e; ++t) full_.push_back(int32_t(t));
        short_tokens_ += e - b;
      }
    }
  } else {
    int64_t t = 0;
    while (t < comp_end) {
      if (is_anchor[size_t(t)]) {
        full_.push_back(int32_t(t));
        ++t;
        continue;
      }
      int64_t e = t;
      while (e < comp_end && !is_anchor[size_t(e)]) ++e;
      if (e - t >= lmin) {
        spans_.push_back({int32_t(t), int32_t(e)});
      } else {
        for (int64_t u = t; u < e; ++u) full_.push_back(int32_t(u));
        short_tokens_ += e - t;
      }
      t = e;
    }
  }
  for (int64_t t = std::max<int64_t>(0, comp_end); t < P_; ++t) full_.push_back(int32_t(t));
  std::sort(full_.begin(), full_.end());
  local_tokens_ = P_ - std::max<int64_t>(0, comp_end);
  span_begin_.clear(), span_end_.clear(), span_len_.clear();
  for (const Span& sp : spans_) {
    span_begin_.push_back(sp.begin);
    span_end_.push_back(sp.end);
    span_len_.push_back(sp.len());
  }
}

// One (layer, KV head) pair's representations (§3.2): routing projection, per span the summary, the
// coarse means and the truncated SVDs; its rank statistics go to its own sums (prefill runs pairs in parallel).
void SekvSelector::build_head(const TraceData& tr, int pair, const std::vector<float>& sur, int rmax,
                              RankSums& su_pair) {
  const size_t ms = spans_.size();
  const int l = pair / kv_heads_, h = pair % kv_heads_;
  HeadState& hs = heads_[size_t(pair)];
  const float* K = tr.k(l, h);
  const float* V = tr.v(l, h);
  hs.W = kernels().pca_projection({.keys = K, .n = P_, .d = d_, .d_proj = dp_});
  hs.summaries.assign(ms * dp_, 0.f);
  hs.kbar.assign(ms * d_, 0.f);
  hs.vbar.assign(ms * d_, 0.f);
  hs.fk.resize(ms);
  hs.fv.resize(ms);
  // eq. 2-3: the surprisal-weighted means k-bar, v-bar of every span and its normalized summary W·k-bar.
  kernels().sekv_summaries({.keys = K, .values = V, .n = P_, .d = d_,
                            .weights = no_surprisal_ ? nullptr : sur.data(), .span_begin = span_begin_.data(),
                            .span_end = span_end_.data(), .spans = int64_t(ms), .W = hs.W.data(), .d_proj = dp_,
                            .kbar = hs.kbar.data(), .vbar = hs.vbar.data(), .summaries = hs.summaries.data()});
  for (size_t i = 0; i < ms; ++i) {
    const Span sp = spans_[i];
    const int64_t n = sp.len();
    // eq. 6-8 with the energy rule as the rank gates' stand-in.
    hs.fk[i] = kernels().truncated_svd({.X = K + int64_t(sp.begin) * d_, .n = n, .d = d_,
                                        .energy_fraction = o_.energy_fraction, .r_max = rmax});
    hs.fv[i] = kernels().truncated_svd({.X = V + int64_t(sp.begin) * d_, .n = n, .d = d_,
                                        .energy_fraction = o_.energy_fraction, .r_max = rmax});
    const double cap = double(std::min<int64_t>({n, int64_t(d_), int64_t(rmax)}));
    for (const ref::LowRankFactors* f : {&hs.fk[i], &hs.fv[i]}) {
      su_pair.rank += f->rank;
      su_pair.ratio += f->rank / cap;
      ++su_pair.obs;
    }
    su_pair.disc_k += hs.fk[i].discarded_energy;
    su_pair.tot_k += hs.fk[i].total_energy;
    su_pair.disc_v += hs.fv[i].discarded_energy;
    su_pair.tot_v += hs.fv[i].total_energy;
  }
}

void SekvSelector::prefill(const TraceData& tr) {
  layers_ = tr.layers;
  kv_heads_ = tr.kv_heads;
  d_ = tr.d;
  P_ = tr.P;
  const int rmax = std::max(1, int(std::llround(p_.max_rank)));
  dp_ = std::clamp(int(std::llround(p_.routing_dim)), 1, d_);

  // ---- segmentation (§3.1), shared by every layer and head ----
  std::vector<float> sur;
  if (tr.source) sur = tr.source->tokens().surprisal;
  segment(sur);

  // ---- budget (the cost model's formula, params.hpp reconstruction_room: token-equivalents per layer
  // and KV head, with the measured full-resolution set and span count) ----
  const double m = double(spans_.size());
  const int g = (tr.source && tr.source->meta().model.group() > 0) ? tr.source->meta().model.group() : tr.group;
  room_ = o_.zoom_budget_tokens >= 0 ? o_.zoom_budget_tokens
                                     : std::max(0.0, reconstruction_room(p_, double(P_), double(full_.size()), m, g, d_));

  // ---- per (layer, KV head) representations (§3.2) ----
  heads_.assign(size_t(layers_) * kv_heads_, {});
  last_zoomed_.assign(size_t(layers_) * kv_heads_, {});
  coarse_bias_.clear();
  for (const Span& sp : spans_) coarse_bias_.push_back(ref::coarse_bias(sp.len()));
  rank_sum_ = rank_ratio_sum_ = disc_k_ = tot_k_ = disc_v_ = tot_v_ = 0;
  rank_obs_ = 0;
  // Every (layer, KV head) builds its own representations: in parallel, each with its own sums of the
  // rank statistics, added up in pair order afterwards (the same result for any thread count).
  std::vector<RankSums> sums(size_t(layers_) * kv_heads_);
  parallel_for(layers_ * kv_heads_, [&](int pair, int) { build_head(tr, pair, sur, rmax, sums[size_t(pair)]); });
  for (const RankSums& x : sums) {
    rank_sum_ += x.rank;
    rank_ratio_sum_ += x.ratio;
    rank_obs_ += x.obs;
    disc_k_ += x.disc_k;
    tot_k_ += x.tot_k;
    disc_v_ += x.disc_v;
    tot_v_ += x.tot_v;
  }
}

void SekvSelector::select(const TraceData& tr, int64_t s, std::vector<HeadSelection>& out) {
  const int64_t p = tr.position(s);
  const size_t ms = spans_.size();
  int64_t comp_tokens = 0;
  for (const Span& sp : spans_) comp_tokens += sp.len();
  std::vector<float> best(ms), Qg;
  for (int l = 0; l < layers_; ++l)
    for (int h = 0; h < kv_heads_; ++h) {
      HeadState& hs = heads_[size_t(l) * kv_heads_ + h];
      HeadSelection& sel = out[size_t(l) * kv_heads_ + h];
      std::vector<int32_t>& zoomed = last_zoomed_[size_t(l) * kv_heads_ + h];
      // Route (eq. 4-5) per query head of the group; the group shares one KV head's selection, so a
      // span's score is the max over the group (any head that wants it gets it).
      const auto& grp = tr.group_of[size_t(h)];
      Qg.resize(grp.size() * size_t(d_));
      for (size_t j = 0; j < grp.size(); ++j) std::copy_n(tr.q(l, grp[j], s), d_, Qg.data() + j * size_t(d_));
      kernels().sekv_routing({.queries = Qg.data(), .rows = int(grp.size()), .d = d_, .W = hs.W.data(),
                              .d_proj = dp_, .summaries = hs.summaries.data(), .span_len = span_len_.data(),
                              .spans = int64_t(ms), .best = best.data()});
      // Threshold (eq. 9, stand-in tau), then the cap: spans in decreasing score until the budget is
      // filled (§3.3, §4.1); the first span that does not fit ends the expansion.
      double used = 0;
      zoomed = kernels().sekv_zoom({.gate = best.data(), .span_len = span_len_.data(), .span_end = span_end_.data(),
                                    .spans = int64_t(ms), .position = p, .threshold = o_.threshold,
                                    .room = room_, .used = &used});
      std::vector<uint8_t> z(ms, 0);
      for (int32_t i : zoomed) z[size_t(i)] = 1;

      // Full-resolution tokens: anchors, short spans, local window, generated tokens up to p.
      for (int32_t t : full_)
        if (t <= p) sel.tokens.push_back(t);
      for (int64_t t = P_; t <= p; ++t) sel.tokens.push_back(int32_t(t));
      // Spans in order: reconstructed tokens (bias 0) or one coarse entry (bias log|S|), as runs into the
      // selector's own arrays (HeadSelection::extra_runs); consecutive coarse spans are one run.
      for (size_t i = 0; i < ms; ++i) {
        const Span sp = spans_[i];
        if (sp.end - 1 > p) continue;
        if (z[i]) {  // the reconstructed tokens, in their factored form U·Σ, Vᵀ (eq. 6)
          const ref::LowRankFactors &fk = hs.fk[i], &fv = hs.fv[i];
          sel.extra_runs.push_back({.count = sp.len(), .k_us = fk.us.data(), .k_vt = fk.vt.data(),
                                    .v_us = fv.us.data(), .v_vt = fv.vt.data(), .k_rank = fk.rank,
                                    .v_rank = fv.rank});
          for (int32_t t = sp.begin; t < sp.end; ++t) sel.extra_tokens.push_back(t);
        } else {
          auto& runs = sel.extra_runs;
          const float* k = hs.kbar.data() + i * d_;
          if (!runs.empty() && runs.back().bias && !runs.back().factored() &&
              runs.back().k + runs.back().count * d_ == k) {
            ++runs.back().count;
          } else {
            runs.push_back({.k = k, .v = hs.vbar.data() + i * d_, .bias = coarse_bias_.data() + i, .count = 1});
          }
        }
      }
      if (ms) {
        zoom_tok_sum_ += comp_tokens > 0 ? used / double(comp_tokens) : 0.0;
        zoom_span_sum_ += double(zoomed.size()) / double(ms);
        recon_tok_sum_ += used;
        ++zoom_obs_;
      }
    }
}

std::map<std::string, Statistic> SekvSelector::statistics() const {
  std::map<std::string, Statistic> st;
  const int64_t m = int64_t(spans_.size());
  int64_t comp = 0;
  for (const Span& sp : spans_) comp += sp.len();
  const int64_t w = local_tokens_;
  const int64_t nonlocal = P_ - w;
  const int64_t heads = int64_t(layers_) * kv_heads_;
  if (nonlocal > 0)
    st[param_table().name(&Params::anchor_ratio)] = {double(int64_t(full_.size()) - w) / double(nonlocal), nonlocal,
                          "full-resolution prompt tokens outside the local window (anchors + spans shorter than L_min) / non-local prompt tokens"};
  if (nonlocal > 0)
    st["boundary_ratio"] = {double(boundary_count_) / double(nonlocal), nonlocal,
                            "surprisal boundaries (anchors, H_t > mu + alpha sigma) / non-local prompt tokens"};
  if (m > 0)
    st[param_table().name(&Params::mean_span_tokens)] = {double(comp) / double(m), m,
                                                          "mean length of a compressed span (>= L_min)"};
  st["spans"] = {double(m), 1, "compressed spans m (per layer and KV head; segmentation is shared)"};
  if (zoom_obs_ > 0) {
    st[param_table().name(&Params::zoom_rate)] = {zoom_tok_sum_ / double(zoom_obs_), zoom_obs_,
                       "tokens of zoomed spans / tokens in compressed spans, per step, layer and KV head"};
    st["zoom_span_rate"] = {zoom_span_sum_ / double(zoom_obs_), zoom_obs_,
                            "zoomed spans / compressed spans, per step, layer and KV head"};
    st["zoom_tokens"] = {recon_tok_sum_ / double(zoom_obs_), zoom_obs_,
                         "reconstructed tokens per step, layer and KV head (Z)"};
  }
  st["zoom_budget_tokens"] = {room_, 1, "reconstruction budget per step, layer and KV head: beta P - F - m - m g d'/(2d)"};
  if (rank_obs_ > 0) {
    st["effective_rank"] = {rank_sum_ / double(rank_obs_), rank_obs_, "mean chosen SVD rank over spans, K and V"};
    st["rank_ratio"] = {rank_ratio_sum_ / double(rank_obs_), rank_obs_,
                        "mean chosen rank / min(|S|, d, R_max) over spans, K and V"};
  }
  if (tot_k_ > 0)
    st["recon_error_k"] = {disc_k_ / tot_k_, rank_obs_ / 2,
                           "discarded spectral energy / total energy of compressed spans' keys (relative squared Frobenius error)"};
  if (tot_v_ > 0)
    st["recon_error_v"] = {disc_v_ / tot_v_, rank_obs_ / 2, "the same for values"};
  st["no_surprisal"] = {no_surprisal_ ? 1.0 : 0.0, heads > 0 ? 1 : 0,
                        "1 when the trace had no surprisal and fixed chunks were used"};
  return st;
}

std::unique_ptr<TraceSelector> make_selector(const ParamValues& p) { return std::make_unique<SekvSelector>(p); }

}  // namespace kvsim::policies::sekv
