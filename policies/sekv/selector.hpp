// SEKV's trace selector (seed 003), exposed for tests and analysis; make_sekv_selector (selector.hpp)
// builds it with the default options. docs/selectors-b.md ("## sekv") is the reading of the paper.
#pragma once
#include <cstdint>
#include <vector>

#include "kernels/reference/lowrank.hpp"
#include "policies/sekv/params.hpp"
#include "policies/kernel_selector.hpp"
#include "traces/select/selector.hpp"

namespace kvsim::policies::sekv {
using replay::HeadSelection;
using replay::Statistic;
using replay::TraceData;
using replay::TraceSelector;


// Knobs that are not cost-model parameters (stand-ins for SEKV's trained parts).
struct SekvOptions {
  // Rank rule of the untrained stand-in for the rank gates (eq. 7-8): the smallest rank whose kept
  // spectral energy reaches this fraction of ||X||_F^2, capped at min(|S|, d, R_max).
  double energy_fraction = 0.9;
  // Stand-in for the learned per-head threshold tau (eq. 9): the paper's permissive initialization
  // (§4.1: tau = 0.05). The budget cap in decreasing routing score decides what is zoomed.
  double threshold = 0.05;
  // Reconstruction budget in tokens per (layer, KV head) and step; < 0: from budget_ratio as the cost
  // model computes it (params.hpp reconstruction_room(): beta P - F - m - m g d' / (2 d)). Tests set it
  // large to zoom every span ("oracle zoom").
  double zoom_budget_tokens = -1;
};

class SekvSelector final : public KernelSelector {
 public:
  SekvSelector(const ParamValues& p, SekvOptions o = {});
  void prefill(const TraceData& trace) override;
  void select(const TraceData& trace, int64_t s, std::vector<HeadSelection>& out) override;
  std::map<std::string, Statistic> statistics() const override;

  // A compressible span: prompt tokens [begin, end), end - begin >= L_min, outside the local window.
  struct Span {
    int32_t begin = 0, end = 0;
    int32_t len() const { return end - begin; }
  };
  // Per (layer slot, KV-head slot) and span: routing summary, coarse entry, factors.
  struct HeadState {
    std::vector<float> W;                // PCA routing projection [d, d'] (stand-in for W^(l,h))
    std::vector<float> summaries;        // [m, d'] unit vectors (eq. 3)
    std::vector<float> kbar, vbar;       // [m, d] surprisal-weighted means (§3.2)
    std::vector<ref::LowRankFactors> fk, fv;  // [m] truncated SVD of K_S, V_S
  };

  const std::vector<int32_t>& anchors() const { return anchors_; }      // boundary tokens (H_t > mu + alpha sigma)
  const std::vector<int32_t>& full_tokens() const { return full_; }     // anchors + short spans + local window (prompt)
  const std::vector<Span>& spans() const { return spans_; }             // compressible spans
  const HeadState& head(int l, int h) const { return heads_[size_t(l) * kv_heads_ + h]; }
  double mu() const { return mu_; }
  double sigma() const { return sigma_; }
  double zoom_budget() const { return room_; }  // reconstruction budget in tokens per (layer, KV head)
  // Spans zoomed at the last select() for (l, h), in routing-score order.
  const std::vector<int32_t>& last_zoomed(int l, int h) const { return last_zoomed_[size_t(l) * kv_heads_ + h]; }

 private:
  Params p_;
  SekvOptions o_;
  int layers_ = 0, kv_heads_ = 0, d_ = 0, dp_ = 0;
  int64_t P_ = 0;
  double mu_ = 0, sigma_ = 0, room_ = 0;
  bool no_surprisal_ = false;
  std::vector<int32_t> anchors_, full_;
  std::vector<Span> spans_;
  std::vector<int32_t> span_begin_, span_end_, span_len_;  // spans_ as arrays, for the backend's steps
  std::vector<HeadState> heads_;
  std::vector<float> coarse_bias_;  // [m] log|S| per span (ref::coarse_bias), referenced by selections
  std::vector<std::vector<int32_t>> last_zoomed_;
  // statistics accumulators
  double zoom_tok_sum_ = 0, zoom_span_sum_ = 0, recon_tok_sum_ = 0;
  int64_t zoom_obs_ = 0;
  double rank_sum_ = 0, rank_ratio_sum_ = 0, disc_k_ = 0, tot_k_ = 0, disc_v_ = 0, tot_v_ = 0;
  int64_t rank_obs_ = 0;
  int64_t boundary_count_ = 0, short_tokens_ = 0, local_tokens_ = 0;

  // One (layer, KV head)'s sums of the rank statistics; prefill adds them up in pair order afterwards.
  struct RankSums {
    double rank = 0, ratio = 0, disc_k = 0, tot_k = 0, disc_v = 0, tot_v = 0;
    int64_t obs = 0;
  };
  // Pieces of prefill(): the segmentation (§3.1) shared by every head, then one head's representations (§3.2).
  void segment(const std::vector<float>& sur);
  void build_head(const TraceData& tr, int pair, const std::vector<float>& sur, int rmax, RankSums& su_pair);
};

}  // namespace kvsim::policies::sekv
