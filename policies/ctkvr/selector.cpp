// ctkvr trace selector (seed 004, CTKVR). Reading of the paper: docs/selectors.md, "## ctkvr".
// Prefill (§3.1.1, Algorithm 1): the last C prompt queries are the centroids; per KV head, each
// centroid's softmax scores over all prompt keys (per query head, max over the GQA group), top rho ids
// -> qcIVF [C, rho]. Decode (§3.1.2, Algorithm 2): cosine(q, centroids) per query head, max over the
// group, top C' centroids, gather + dedup their ids (recall); the recalled offloaded ids reranked by
// softmax(q.k) per head, max over the group, top rho'; attended = init + local (GPU) U the rho' chosen
// (CPU): one softmax over the union equals the paper's merge of the two partial states. Dynamic
// centroid update (§3.1.3, Algorithm 2 line 12): the current query becomes a centroid whose id list is
// the top rho of the same rerank scores, replacing the oldest centroid (FIFO).
#include "policies/ctkvr/selector.hpp"
#include "policies/ctkvr/params.hpp"
#include "policies/ctkvr/policy.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "kernels/reference/reference.hpp"
#include "core/parallel.hpp"

namespace kvsim::policies::ctkvr {
using namespace kvsim::replay;

namespace {
int64_t as_int(double v) { return int64_t(std::llround(v)); }
}  // namespace

CtkvrSelector::CtkvrSelector(const ParamValues& p, CtkvrOptions o) : p_(param_table().read(p)), o_(o) {}

void CtkvrSelector::prefill(const TraceData& tr) {
  layers_ = tr.layers;
  kv_heads_ = tr.kv_heads;
  d_ = tr.d;
  P_ = tr.P;
  init_ = std::max<int64_t>(0, as_int(p_.init_tokens));
  local_ = std::max<int64_t>(0, as_int(p_.local_tokens));
  rho_prime_ = int(std::max<int64_t>(1, as_int(p_.budget_tokens)));
  // Algorithm 1 line 1: the last C query vectors of the prompt, C = centroid_count (params.hpp: the
  // parameter, App. C.2's 1024 by default, or with 0 §4.1.1's min(2048, P/16)). A trace stores only
  // some prompt query rows (the question window), so C is capped by what is there.
  std::vector<int64_t> prompt_rows;
  for (int64_t s = 0; s < tr.S; ++s)
    if (tr.position(s) < P_) prompt_rows.push_back(s);
  C_ = int(std::min<int64_t>(std::max<int64_t>(1, as_int(centroid_count(p_, double(P_)))), int64_t(prompt_rows.size())));
  cprime_ = int(std::min<int64_t>(std::max<int64_t>(1, as_int(p_.probes)), C_));
  rho_ = int(std::min<int64_t>(std::max<int64_t>(1, as_int(centroid_ids(p_))), P_));
  const float scale = 1.f / std::sqrt(float(d_));
  heads_.assign(size_t(layers_) * kv_heads_, {});
  last_.assign(size_t(layers_) * kv_heads_, {});
  sums_.assign(size_t(layers_) * kv_heads_, {});
  unreachable_sum_ = 0;
  unreachable_obs_ = 0;
  const size_t first = prompt_rows.size() - size_t(C_);
  // Every (layer, KV head) builds its own qcIVF: in parallel.
  parallel_for(layers_ * kv_heads_, [&](int pair, int) {
      const int l = pair / kv_heads_, h = pair % kv_heads_;
      HeadState& hs = heads_[size_t(pair)];
      const auto& grp = tr.group_of[size_t(h)];
      const int G = int(grp.size());
      hs.centroids.assign(size_t(G) * C_ * d_, 0.f);
      hs.age.assign(size_t(C_), 0);
      for (int g = 0; g < G; ++g)
        for (int c = 0; c < C_; ++c) {
          const int64_t s = prompt_rows[first + size_t(c)];
          const float* q = tr.q(l, grp[size_t(g)], s);
          std::copy(q, q + d_, hs.centroids.begin() + (int64_t(g) * C_ + c) * d_);
          hs.age[size_t(c)] = tr.position(s);
        }
      hs.ivf.assign(size_t(C_) * rho_, 0);
      hs.oldest = 0;  // slot 0 holds the earliest of the last C queries
      // Algorithm 1 lines 2-4 over the whole prompt key cache (not causally masked, as written).
      if (C_ > 0)
        kernels().qcivf_build({.centroids = hs.centroids.data(), .groups = G, .C = C_, .keys = tr.k(l, h), .n = P_,
                               .d = d_, .scale = scale, .rho = rho_, .ivf = hs.ivf.data()});
  });
  prev_s_ = -1;
}

std::vector<int32_t> CtkvrSelector::observe_truth(const TraceData& tr, int l, int h, int64_t s, int G,
                                                  Last& last) const {
  const float scale = 1.f / std::sqrt(float(d_));
  auto range_of = [&](int64_t row) {  // this row's offloaded ids [init_end, local_begin)
    const int64_t n = tr.position(row) + 1;
    const int64_t init_end = std::min(init_, n);
    return std::pair<int64_t, int64_t>{init_end, std::max<int64_t>(init_end, n - local_)};
  };
  const int64_t every = std::max(1, o_.observe_every);
  if (s < last.obs_s0 || (s - last.obs_s0) % every != 0 || (s - last.obs_s0) / every >= last.obs_rows) {
    // A new block: this row and the next observed rows, at most kObserveBlock.
    constexpr int64_t kObserveBlock = 16;
    last.obs_s0 = s;
    last.obs_rows = 0;
    last.obs_lo = range_of(s).first;
    last.obs_hi = range_of(s).second;
    while (last.obs_rows < kObserveBlock && s + last.obs_rows * every < tr.S) {
      const auto [a, b] = range_of(s + last.obs_rows * every);
      last.obs_lo = std::min(last.obs_lo, a);
      last.obs_hi = std::max(last.obs_hi, b);
      ++last.obs_rows;
    }
    const int64_t m = last.obs_hi - last.obs_lo;
    std::vector<float> rows(size_t(last.obs_rows) * G * d_);
    const auto& grp = tr.group_of[size_t(h)];
    for (int64_t r = 0; r < last.obs_rows; ++r)
      for (int g = 0; g < G; ++g) {
        const float* q = tr.q(l, grp[size_t(g)], s + r * every);
        std::copy(q, q + d_, rows.begin() + (r * G + g) * d_);
      }
    last.obs_scores.resize(size_t(last.obs_rows) * G * size_t(m));
    kernels().score_gemm({.Q = rows.data(), .m = last.obs_rows * G, .M = tr.k(l, h) + last.obs_lo * d_, .n = m,
                          .d = d_, .scale = scale, .S = last.obs_scores.data()});
  }
  // ref::ctkvr_rerank's steps on this row's slice of the scores: softmax per query head, max over the
  // group, top rho' (same numbers, so the same ids).
  const auto [a, b] = range_of(s);
  const int64_t m = b - a, width = last.obs_hi - last.obs_lo, r = (s - last.obs_s0) / every;
  std::vector<float> S(size_t(G) * size_t(m)), A(static_cast<size_t>(m));
  for (int g = 0; g < G; ++g) {
    const float* src = last.obs_scores.data() + (r * G + g) * width + (a - last.obs_lo);
    std::copy(src, src + m, S.begin() + int64_t(g) * m);
  }
  ref::softmax_rows(S.data(), G, m);
  ref::reduce_max_rows(S.data(), G, m, A.data());
  std::vector<int32_t> truth = kernels().topk({.scores = A.data(), .n = m, .k = rho_prime_});
  for (int32_t& t : truth) t = int32_t(a + t);
  return truth;
}

void CtkvrSelector::select(const TraceData& tr, int64_t s, std::vector<HeadSelection>& out) {
  const int64_t p = tr.position(s);
  const int64_t n = p + 1;  // keys 0..p
  const float scale = 1.f / std::sqrt(float(d_));
  // GPU-resident part (Algorithm 1 lines 5-6, §3.2): the first init_tokens and the last local_tokens
  // tokens up to p (a sliding window, StreamingLLM's static pattern [31]); everything else is offloaded.
  const int64_t init_end = std::min(init_, n);
  const int64_t local_begin = std::max<int64_t>(init_end, n - local_);
  auto on_gpu = [&](int64_t t) { return t < init_end || t >= local_begin; };
  const bool adjacent = s > 0 && prev_s_ == s - 1 && tr.position(s - 1) == p - 1;
  int64_t off_gen = 0;
  for (int64_t t = std::max(P_, init_end); t < local_begin; ++t) ++off_gen;
  // Every (layer, KV head) selects on its own state: in parallel.
  parallel_for(layers_ * kv_heads_, [&](int pair, int) {
      const int l = pair / kv_heads_, h = pair % kv_heads_;
      Sums& st = sums_[size_t(pair)];
      std::vector<float> Q;
      HeadState& hs = heads_[size_t(l) * kv_heads_ + h];
      Last& last = last_[size_t(l) * kv_heads_ + h];
      HeadSelection& sel = out[size_t(l) * kv_heads_ + h];
      const auto& grp = tr.group_of[size_t(h)];
      const int G = int(grp.size());
      Q.resize(size_t(G) * d_);
      for (int g = 0; g < G; ++g) {
        const float* q = tr.q(l, grp[size_t(g)], s);
        std::copy(q, q + d_, Q.begin() + int64_t(g) * d_);
        if (adjacent) {
          const float* q0 = tr.q(l, grp[size_t(g)], s - 1);
          float c = 0;
          ref::score_gemv(q, q0, 1, d_, &c, ref::ScoreKind::cosine);
          st.cos += c;
          ++st.cos_obs;
        }
      }
      last.recall.clear();
      last.offloaded.clear();
      last.chosen.clear();
      if (C_ > 0) {
        // (b) Q2Q^(c) recall: lines 1-4.
        last.recall = kernels().ctkvr_recall({.q = Q.data(), .groups = G, .centroids = hs.centroids.data(), .C = C_,
                                              .d = d_, .ivf = hs.ivf.data(), .rho = rho_, .c_prime = cprime_});
        for (int32_t t : last.recall)
          if (t <= p && !on_gpu(t)) last.offloaded.push_back(t);
      }
      // (c) Q2K rerank: lines 5-6 over the recalled keys held on the CPU; one pass ranks for both rho'
      // (the attention) and rho (the centroid update), the latter a prefix-compatible superset.
      const int keep = std::max(rho_prime_, rho_);
      std::vector<int32_t> ranked;
      if (!last.offloaded.empty())
        ranked = kernels().ctkvr_rerank({.q = Q.data(), .groups = G, .keys = tr.k(l, h), .n = n,
                                         .resident_rows = tr.T, .d = d_, .recalled = last.offloaded.data(),
                                         .m = int64_t(last.offloaded.size()), .scale = scale, .rho_prime = keep});
      last.chosen.assign(ranked.begin(), ranked.begin() + std::min<size_t>(ranked.size(), size_t(rho_prime_)));
      // Attended set: GPU part U CPU part.
      for (int64_t t = 0; t < init_end; ++t) sel.tokens.push_back(int32_t(t));
      std::vector<int32_t> cpu = last.chosen;
      std::sort(cpu.begin(), cpu.end());
      for (int32_t t : cpu) sel.tokens.push_back(t);  // offloaded: between init_end and local_begin
      for (int64_t t = local_begin; t < n; ++t) sel.tokens.push_back(int32_t(t));
      // init < the chosen offloaded ids < local: already sorted, unless parameters make the parts overlap.
      if (!std::is_sorted(sel.tokens.begin(), sel.tokens.end())) std::sort(sel.tokens.begin(), sel.tokens.end());
      // Statistics (footnote 6: alpha = L_recall / (rho C')).
      if (C_ > 0) {
        st.alpha += double(last.recall.size()) / (double(rho_) * cprime_);
        st.recall += double(last.recall.size());
        st.off += double(last.offloaded.size());
        st.chosen += double(last.chosen.size());
        st.gpu += double(init_end + (n - local_begin));
        ++st.obs;
      }
      if (o_.observe_every > 0 && s % o_.observe_every == 0 && local_begin > init_end) {
        // Observation 2 input: the true top-rho' of all offloaded keys under the rerank's score (the
        // rerank over the contiguous ids init_end..local_begin-1, from the block's scores).
        std::vector<int32_t> truth = observe_truth(tr, l, h, s, G, last);
        std::sort(truth.begin(), truth.end());
        std::vector<int32_t> a, b(cpu);
        std::set_intersection(truth.begin(), truth.end(), last.offloaded.begin(), last.offloaded.end(),
                              std::back_inserter(a));
        const double in_recall = double(a.size());
        a.clear();
        std::set_intersection(truth.begin(), truth.end(), b.begin(), b.end(), std::back_inserter(a));
        if (!truth.empty()) {
          st.stage_recall += in_recall / double(truth.size());
          st.topk_recall += double(a.size()) / double(truth.size());
          ++st.topk_obs;
        }
      }
      // (d) Dynamic centroid update (line 12): qcIVF.FIFO(A'_kv.top(rho)); the current query of every
      // head of the group becomes the newest centroid, replacing the oldest. A list shorter than rho
      // (fewer offloaded ids recalled than rho) is padded by repeating its best id, which dedup removes.
      if (o_.fifo_update && C_ > 0 && !ranked.empty()) {
        const int slot = hs.oldest;
        for (int g = 0; g < G; ++g)
          std::copy(Q.begin() + int64_t(g) * d_, Q.begin() + int64_t(g + 1) * d_,
                    hs.centroids.begin() + (int64_t(g) * C_ + slot) * d_);
        int32_t* row = hs.ivf.data() + int64_t(slot) * rho_;
        const size_t k = std::min(ranked.size(), size_t(rho_));
        for (int j = 0; j < rho_; ++j) row[j] = size_t(j) < k ? ranked[size_t(j)] : ranked[0];
        hs.age[size_t(slot)] = p;
        hs.oldest = (slot + 1) % C_;
        ++st.updates;
      }
  });
  unreachable_sum_ += double(off_gen);
  ++unreachable_obs_;
  prev_s_ = s;
}

std::map<std::string, Statistic> CtkvrSelector::statistics() const {
  Sums t;
  for (const Sums& x : sums_) {
    t.alpha += x.alpha;
    t.recall += x.recall;
    t.off += x.off;
    t.chosen += x.chosen;
    t.gpu += x.gpu;
    t.obs += x.obs;
    t.cos += x.cos;
    t.cos_obs += x.cos_obs;
    t.stage_recall += x.stage_recall;
    t.topk_recall += x.topk_recall;
    t.topk_obs += x.topk_obs;
    t.updates += x.updates;
  }
  std::map<std::string, Statistic> st;
  if (t.obs > 0) {
    st[param_table().name(&Params::dedup)] = {t.alpha / double(t.obs), t.obs,
                                               "alpha = unique recalled ids / (rho C') (footnote 6, App. C.2)"};
    st["recall_tokens"] = {t.recall / double(t.obs), t.obs, "L_recall: unique ids recalled by the C' probed centroids"};
    st["recall_offloaded_tokens"] = {t.off / double(t.obs), t.obs,
                                     "recalled ids that are offloaded (not init/local), i.e. reranked on the CPU"};
    st["cpu_tokens"] = {t.chosen / double(t.obs), t.obs, "tokens chosen by the rerank (<= rho')"};
    st["gpu_tokens"] = {t.gpu / double(t.obs), t.obs, "init + local tokens attended on the GPU"};
  }
  st["centroids_effective"] = {double(C_), 1, "C_e = min(C, prompt query rows in the trace); C = centroids (App. C.2: 1024), min(2048, P/16) at 0 (§4.1.1)"};
  if (t.cos_obs > 0)
    st["adjacent_query_cosine"] = {t.cos / double(t.cos_obs), t.cos_obs,
                                   "cosine of each query head's query with its previous position's (Obs. 1)"};
  if (t.topk_obs > 0) {
    const std::string rows = o_.observe_every == 1 ? std::string(" (every row)")
                                                   : " (rows s % " + std::to_string(o_.observe_every) + " == 0)";
    st["centroid_recall"] = {t.stage_recall / double(t.topk_obs), t.topk_obs,
                             "fraction of the true top-rho' offloaded keys inside the recalled set (Obs. 2)" + rows};
    st["topk_recall"] = {t.topk_recall / double(t.topk_obs), t.topk_obs,
                         "fraction of the true top-rho' offloaded keys chosen by the rerank" + rows};
  }
  if (unreachable_obs_ > 0)
    st["offloaded_generated_tokens"] = {unreachable_sum_ / double(unreachable_obs_), unreachable_obs_,
                                        "generated tokens past the local window: offloaded, in no qcIVF list, never attended"};
  st["centroid_updates"] = {double(t.updates), 1, "FIFO centroid updates performed (per layer and KV head, summed)"};
  return st;
}

std::unique_ptr<TraceSelector> make_selector(const ParamValues& p) { return std::make_unique<CtkvrSelector>(p); }

}  // namespace kvsim::policies::ctkvr
