// CTKVR's trace selector (seed 004), exposed for tests and analysis; make_ctkvr_selector (selector.hpp)
// builds it with the default options. docs/selectors-b.md ("## ctkvr") is the reading of the paper.
#pragma once
#include <cstdint>
#include <vector>

#include "policies/ctkvr/params.hpp"
#include "policies/kernel_selector.hpp"

namespace kvsim::policies::ctkvr {
using replay::HeadSelection;
using replay::Statistic;
using replay::TraceData;
using replay::TraceSelector;


struct CtkvrOptions {
  // Measure CTKVR's Observation 2 input: the true top-rho' of the offloaded keys (the same score as the
  // rerank, over every offloaded key) and how much of it the centroid stage recalled and the rerank
  // chose, at every trace row s with s % observe_every == 0 (0: never). Each observed row costs one
  // scoring pass over the context per (layer, KV head) -- as much as the rest of CTKVR's selection --
  // and it is a statistic only, so by default one row in four is sampled (the selection is unchanged).
  int observe_every = 4;
  // Dynamic centroid update (§3.1.3, Algorithm 2 (d)); off reproduces "CTKVR w/o DCU" (Table 5).
  bool fifo_update = true;
};

class CtkvrSelector final : public KernelSelector {
 public:
  CtkvrSelector(const ParamValues& p, CtkvrOptions o = {});
  void prefill(const TraceData& trace) override;
  void select(const TraceData& trace, int64_t s, std::vector<HeadSelection>& out) override;
  std::map<std::string, Statistic> statistics() const override;

  // Per (layer slot, KV-head slot): the centroids of each query head of the group [G, C, d] (group-major,
  // the layout ref::ctkvr_recall takes), the inverted file [C, rho_e] and the FIFO's oldest slot.
  struct HeadState {
    std::vector<float> centroids;
    std::vector<int32_t> ivf;
    int oldest = 0;                 // slot the next update overwrites
    std::vector<int64_t> age;       // [C] position of the query each centroid came from (for tests)
  };
  const HeadState& head(int l, int h) const { return heads_[size_t(l) * kv_heads_ + h]; }
  int centroids() const { return C_; }   // C_e = min(C, prompt query rows in the trace)
  int rho() const { return rho_; }        // rho_e = min(rho, P)
  int probes() const { return cprime_; }  // C'_e = min(C', C_e)
  // Of the last select() for (l, h): the deduplicated recall (all ids), the part reranked (offloaded
  // ids), and the rho' chosen (rank order).
  const std::vector<int32_t>& last_recall(int l, int h) const { return last_[size_t(l) * kv_heads_ + h].recall; }
  const std::vector<int32_t>& last_reranked(int l, int h) const { return last_[size_t(l) * kv_heads_ + h].offloaded; }
  const std::vector<int32_t>& last_chosen(int l, int h) const { return last_[size_t(l) * kv_heads_ + h].chosen; }

 private:
  struct Last {
    std::vector<int32_t> recall, offloaded, chosen;
    // Observation 2's scores for a block of upcoming observed rows (obs_s0 + r * observe_every):
    // [rows][G][hi - lo] dots of each row's queries with keys lo..hi-1, computed in one GEMM-shaped pass
    // (each key row read once per block, not once per step); each element is the score the per-step
    // rerank would compute.
    std::vector<float> obs_scores;
    int64_t obs_s0 = -1, obs_rows = 0, obs_lo = 0, obs_hi = 0;
  };
  // Observation 2's true top-rho' of the offloaded keys at an observed row s, from a block's scores
  // (the next observed rows, computed on a miss).
  std::vector<int32_t> observe_truth(const TraceData& tr, int l, int h, int64_t s, int G, Last& last) const;
  Params p_;
  CtkvrOptions o_;
  int layers_ = 0, kv_heads_ = 0, d_ = 0;
  int64_t P_ = 0;
  int C_ = 0, cprime_ = 0, rho_ = 0, rho_prime_ = 0;
  int64_t init_ = 0, local_ = 0;
  std::vector<HeadState> heads_;
  std::vector<Last> last_;
  int64_t prev_s_ = -1;
  // Statistics accumulators, one set per (layer, KV head): select() runs the pairs in parallel, and
  // statistics() adds the sets up in pair order (the same result for any thread count).
  struct Sums {
    double alpha = 0, recall = 0, off = 0, chosen = 0, gpu = 0;
    int64_t obs = 0;
    double cos = 0;
    int64_t cos_obs = 0;
    double stage_recall = 0, topk_recall = 0;
    int64_t topk_obs = 0, updates = 0;
  };
  std::vector<Sums> sums_;
  double unreachable_sum_ = 0;
  int64_t unreachable_obs_ = 0;
};

}  // namespace kvsim::policies::ctkvr
