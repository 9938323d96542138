// sentencekv selector (seed 001, SentenceKV: sentence-level semantic KV caching).
//
// Counting (§4.1: the token budget tau "represents the maximum number of tokens we can keep in GPU memory
// during decoding"; eq. 3 attends "only these retrieved tokens"): tau and floor(r tau) include the
// always-resident sinks (first `sinks` tokens) and recent tokens (last `recent` prompt tokens), as in the
// cost model (cost.cpp) and the public code (`token_budget - recent_budget - start_budget` retrieved).
// With a = |sinks u recent| = min(P, sinks + recent): floor(r tau) - a tokens are kept for retrieval and
// at most tau - a of them are retrieved per selection; generated tokens are attended on top of tau.
//
// Prefill (§4.1; Algorithm 1 in §A.2; §A.7):
//   * Sentence buckets: the trace's sentence_starts (TraceMeta). The public code splits by token-id
//     membership in a punctuation set; a trace records the boundaries it was cut at, which is the same
//     split made once, tokenizer-aware. Prompt sentence i covers [start_i, start_{i+1}) clipped to P.
//   * Token importance: the last N = obs_window prompt queries (capped by the rows the trace holds at
//     P-N .. P-1) attend causally; importance alpha_i of prefix token i < P-N = its attention
//     probability summed over the window and "across all the attention heads" (§4.1) — every stored
//     query head of the layer (ref::obs_window_scores per GQA group, summed over groups). Eq. 1 indexes
//     the retained set S_s by sentence only, not by head, so one kept set per layer serves all its heads.
//   * Keep the top floor(r * tau) - a tokens GLOBALLY over the prompt (§4.1, §A.7: not per sentence;
//     Algorithm 1's per-sentence loop is the older reading). Candidates are the scored prefix minus the
//     always-resident sinks and recent tokens. Prompt tokens in [P-N, P-recent) when recent < N are
//     never scored and never attended.
//   * Per (layer, KV head, sentence): the mean key of the sentence's kept tokens (eq. 1,
//     ref::segment_mean over the kept tokens gathered by sentence). Sentences with no kept token
//     have no vector and are never fetched; their count per layer is the statistic `kept_sentences`.
// Decode (§4.2, eq. 2-3):
//   * q_bar = mean of the queries of the sentence being generated: rows at positions
//     [max(P, last sentence start <= p), p], averaged over them and over the KV head's group of query
//     heads (the paper scores "for each attention head"; one KV head's group shares one selection).
//   * Score every sentence vector (ref::score_gemv, dot); take sentences in score order (ref::topk)
//     and their kept tokens until tau - a tokens. Algorithm 1 line 17 retrieves exactly "top-tau
//     tokens", so the sentence that would overflow contributes its most important kept tokens up to the
//     remainder.
//   * Attended: retrieved tokens + sinks + the last `recent` prompt tokens + every generated token
//     P..p (generated KV stays on the GPU, as the cost model's memory() counts it; the public code
//     reaches generated tokens through its recent window and the vectors it appends for completed
//     generated sentences, not modeled). Where the kept KV lives (`kept_kv_on`) changes the cost, not
//     the selection.
//   * `reselect`: per_step (Algorithm 1: q_bar and the retrieval every step) or per_sentence (§4.2's
//     prose: "once a complete sentence has been generated, we compute a mean query"): the first decode
//     step selects with the queries so far, then a selection is made only when the current sentence
//     changes (a sentence start is reached), scored by the mean query of the sentence just completed;
//     in between the retrieved set is kept.
// Statistics: "mean_sentence_tokens" (P / prompt sentences) and "kept_sentences" (sentences holding a
// kept token, mean over layers) replace the cost-model parameters of those names; "sentences_per_fetch"
// and "tokens_per_fetch" (per selection, per layer and KV head: the H2D copy of the cost model),
// "fetched_tokens_per_step", "fetched_sentences_per_step" (per decode step: per-fetch means times
// reselect_fraction),
// "reselect_fraction", "reselections", "kept_tokens" (floor(r tau) - a capped), "selected_fraction".
#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "policies/kernel_selector.hpp"
#include "traces/select/selector.hpp"
#include "policies/sentencekv/params.hpp"
#include "policies/sentencekv/policy.hpp"

namespace kvsim::policies::sentencekv {
using namespace kvsim::replay;

namespace {

class SentenceKvSelector final : public KernelSelector {
 public:
  explicit SentenceKvSelector(const ParamValues& values) {
    const Params p = param_table().read(values);
    tau_ = std::max<int64_t>(1, int64_t(p.token_budget));
    keep_ = p.keep_factor;
    window_ = std::max<int64_t>(1, int64_t(p.obs_window));
    sinks_ = std::max<int64_t>(0, int64_t(p.sinks));
    recent_ = std::max<int64_t>(0, int64_t(p.recent));
    per_sentence_ = int(p.reselect) == 1;
  }

  void prefill(const TraceData& tr) override {
    const int64_t P = tr.P;
    const int L = tr.layers, H = tr.kv_heads, d = tr.d;
    fetch_sentences_ = fetch_tokens_ = sel_sum_ = 0;  // a new trace: statistics start over
    fetches_ = steps_ = reselections_ = sel_n_ = 0;
    const auto& pos = tr.source->tokens().query_positions;
    const auto it = std::lower_bound(pos.begin(), pos.end(), P);
    const int64_t last = int64_t(it - pos.begin()) - 1;
    int64_t w = 0;
    while (last - w >= 0 && w < window_ && pos[size_t(last - w)] == P - 1 - w) ++w;
    if (w == 0) throw std::runtime_error("sentencekv selector: the trace has no query at the last prompt position");
    w_ = w;
    const int64_t s0 = last - w + 1, prefix = P - w;

    // Sentence buckets of the prompt.
    starts_.clear();
    for (int64_t st : tr.source->meta().sentence_starts)
      if (st < P) starts_.push_back(st);
    if (starts_.empty() || starts_[0] != 0) starts_.insert(starts_.begin(), 0);
    const int64_t nsent = int64_t(starts_.size());
    mean_sentence_ = double(P) / double(nsent);
    auto sentence_of = [&](int64_t t) {
      return int32_t(std::upper_bound(starts_.begin(), starts_.end(), t) - starts_.begin() - 1);
    };

    const int64_t cand_end = std::min(prefix, P - recent_);
    const int64_t cand_begin = std::min(sinks_, std::max<int64_t>(cand_end, 0));
    // Sinks and recent count in tau and floor(r tau) (§4.1's tau is all the GPU holds at decode).
    const int64_t resident = std::min<int64_t>(P, sinks_ + recent_);
    const int64_t keep_n = std::max<int64_t>(0, int64_t(std::floor(keep_ * double(tau_))) - resident);
    retrieve_ = std::max<int64_t>(0, tau_ - resident);
    layers_.assign(size_t(L), {});
    std::vector<float> Qw, full(static_cast<size_t>(P)), alpha(static_cast<size_t>(std::max<int64_t>(prefix, 0)));
    const float scale = 1.f / std::sqrt(float(d));
    kept_total_ = kept_sentences_ = 0;
    for (int l = 0; l < L; ++l) {
      Layer& ly = layers_[size_t(l)];
      std::fill(alpha.begin(), alpha.end(), 0.f);
      for (int h = 0; h < H; ++h) {
        const auto& group = tr.group_of[size_t(h)];
        const int G = int(group.size());
        if (G == 0 || prefix <= 0) continue;
        Qw.resize(size_t(G) * w * d);
        for (int g = 0; g < G; ++g)
          std::copy_n(tr.q(l, group[size_t(g)], s0), size_t(w) * d, Qw.data() + size_t(g) * w * d);
        kernels().obs_window_scores({.queries = Qw.data(), .groups = G, .window = int(w), .keys = tr.k(l, h), .n = P,
                                     .d = d, .scale = scale, .scores = full.data()});
        for (int64_t i = 0; i < prefix; ++i) alpha[size_t(i)] += full[size_t(i)];
      }
      // Global top floor(r tau) among the candidates.
      std::vector<float> cand(alpha.begin() + cand_begin, alpha.begin() + std::max(cand_begin, cand_end));
      // rank order (most important first)
      std::vector<int32_t> top = kernels().topk({.scores = cand.data(), .n = int64_t(cand.size()), .k = keep_n});
      // Group by sentence, keeping importance order inside each sentence.
      std::vector<std::vector<int32_t>> by_sentence(static_cast<size_t>(nsent));
      for (int32_t c : top) {
        const int32_t t = int32_t(c + cand_begin);
        by_sentence[size_t(sentence_of(t))].push_back(t);
      }
      for (int64_t sidx = 0; sidx < nsent; ++sidx)
        if (!by_sentence[size_t(sidx)].empty()) {
          ly.sentence_ids.push_back(int32_t(sidx));
          ly.tokens_by_importance.push_back(std::move(by_sentence[size_t(sidx)]));
        }
      kept_total_ += double(top.size());
      kept_sentences_ += double(ly.sentence_ids.size());
      // Per KV head, the mean key of each sentence's kept tokens (eq. 1).
      const int64_t m = int64_t(ly.sentence_ids.size());
      ly.vectors.assign(size_t(H) * m * d, 0.f);
      for (int h = 0; h < H; ++h) {
        std::vector<float> X;
        std::vector<int32_t> seg;
        for (int64_t j = 0; j < m; ++j) {
          seg.push_back(int32_t(X.size() / size_t(d)));
          for (int32_t t : ly.tokens_by_importance[size_t(j)]) {
            const float* k = tr.k(l, h) + int64_t(t) * d;
            X.insert(X.end(), k, k + d);
          }
        }
        if (m > 0)
          kernels().segment_mean({.X = X.data(), .n = int64_t(X.size() / size_t(d)), .d = d, .starts = seg.data(),
                                  .segments = int64_t(seg.size()), .out = ly.vectors.data() + size_t(h) * m * d});
      }
    }
    kept_total_ /= std::max(1, L);
    kept_sentences_ /= std::max(1, L);
    current_.assign(size_t(L) * H, {});
    have_selection_ = false;
    sel_start_ = -1;
  }

  void select(const TraceData& tr, int64_t s, std::vector<HeadSelection>& out) override {
    const int64_t P = tr.P, p = tr.position(s);
    const int L = tr.layers, H = tr.kv_heads, d = tr.d;
    const auto& pos = tr.source->tokens().query_positions;
    const auto& all_starts = tr.source->meta().sentence_starts;
    // The sentence being generated: from the last start <= p, not before P (Q_s starts empty at decode).
    auto st = std::upper_bound(all_starts.begin(), all_starts.end(), p);
    int64_t cur = P;
    if (st != all_starts.begin()) cur = std::max(P, *(st - 1));
    ++steps_;

    bool reselect = true;
    int64_t q_from = cur, q_to = p;  // query positions averaged into q_bar (inclusive)
    if (per_sentence_ && have_selection_) {
      reselect = cur != sel_start_;
      if (reselect) q_from = sel_start_, q_to = cur - 1;  // the sentence just completed
    }
    if (reselect) {
      ++reselections_;
      const int64_t r0 = int64_t(std::lower_bound(pos.begin(), pos.end(), q_from) - pos.begin());
      const int64_t r1 = int64_t(std::upper_bound(pos.begin(), pos.end(), q_to) - pos.begin());
      std::vector<float> qbar(static_cast<size_t>(d)), scores;
      for (int l = 0; l < L; ++l) {
        const Layer& ly = layers_[size_t(l)];
        const int64_t m = int64_t(ly.sentence_ids.size());
        for (int h = 0; h < H; ++h) {
          std::fill(qbar.begin(), qbar.end(), 0.f);
          const auto& group = tr.group_of[size_t(h)];
          int64_t cnt = 0;
          for (int qh : group)
            for (int64_t r = r0; r < r1; ++r, ++cnt) {
              const float* q = tr.q(l, qh, r);
              for (int i = 0; i < d; ++i) qbar[size_t(i)] += q[i];
            }
          if (cnt > 0)
            for (float& x : qbar) x /= float(cnt);
          scores.assign(size_t(m), 0.f);
          if (m > 0)
            kernels().score_gemv({.q = qbar.data(), .M = ly.vectors.data() + size_t(h) * m * d, .n = m, .d = d,
                                  .scores = scores.data()});
          std::vector<int32_t>& got = current_[size_t(l) * H + h];
          got.clear();
          int64_t budget = retrieve_, nsent = 0;
          for (int32_t j : kernels().topk({.scores = scores.data(), .n = m, .k = m})) {
            if (budget <= 0) break;
            const auto& toks = ly.tokens_by_importance[size_t(j)];
            const int64_t take = std::min<int64_t>(budget, int64_t(toks.size()));
            got.insert(got.end(), toks.begin(), toks.begin() + take);
            budget -= take;
            ++nsent;
          }
          std::sort(got.begin(), got.end());
          fetch_sentences_ += double(nsent);
          fetch_tokens_ += double(got.size());
          ++fetches_;
        }
      }
      have_selection_ = true;
      sel_start_ = cur;
    }
    // Attended set: sinks + retrieved + recent prompt tokens + generated tokens.
    for (int l = 0; l < L; ++l)
      for (int h = 0; h < H; ++h) {
        auto& t = out[size_t(l) * H + h].tokens;
        t.clear();
        for (int64_t i = 0; i < std::min(sinks_, P); ++i) t.push_back(int32_t(i));
        t.insert(t.end(), current_[size_t(l) * H + h].begin(), current_[size_t(l) * H + h].end());
        for (int64_t i = std::max<int64_t>(0, P - recent_); i < P; ++i) t.push_back(int32_t(i));
        for (int64_t i = P; i <= p; ++i) t.push_back(int32_t(i));
        t = kernels().dedup({.ids = t.data(), .n = int64_t(t.size())});
        sel_sum_ += double(t.size()) / double(p + 1);
        ++sel_n_;
      }
  }

  std::map<std::string, Statistic> statistics() const override {
    std::map<std::string, Statistic> m;
    m[param_table().name(&Params::mean_sentence_tokens)] = {mean_sentence_, int64_t(starts_.size()),
                                                            "mean prompt sentence length: P / sentences"};
    m["sentences_per_fetch"] = {fetches_ ? fetch_sentences_ / double(fetches_) : 0, fetches_,
                                "sentences retrieved per selection, per layer and KV head"};
    m["tokens_per_fetch"] = {fetches_ ? fetch_tokens_ / double(fetches_) : 0, fetches_,
                             "tokens retrieved (copied CPU->GPU when kept_kv_on = cpu) per selection, per layer and KV head (<= token_budget - sinks - recent)"};
    const double frac = steps_ ? double(reselections_) / double(steps_) : 0;
    m["fetched_tokens_per_step"] = {fetches_ ? fetch_tokens_ / double(fetches_) * frac : 0, steps_,
                                    "tokens copied per decode step, per layer and KV head"};
    m["fetched_sentences_per_step"] = {fetches_ ? fetch_sentences_ / double(fetches_) * frac : 0, steps_,
                                       "sentences fetched per decode step, per layer and KV head"};
    m["reselect_fraction"] = {frac, steps_, "fraction of decode steps that rescore sentences and reload"};
    m["reselections"] = {double(reselections_), steps_, "decode steps that rescored sentences"};
    m["kept_tokens"] = {kept_total_, int64_t(layers_.size()),
                        "prompt tokens kept for retrieval at prefill per layer (floor(r tau) - sinks - recent)"};
    m[param_table().name(&Params::kept_sentences)] = {kept_sentences_, int64_t(layers_.size()),
                           "prompt sentences holding at least one kept token (one vector per KV head), per layer"};
    m["selected_fraction"] = {sel_n_ ? sel_sum_ / double(sel_n_) : 0, sel_n_,
                              "attended tokens / (p + 1) per decode step, layer and KV head"};
    return m;
  }

 private:
  struct Layer {
    std::vector<int32_t> sentence_ids;                      // sentences with kept tokens
    std::vector<std::vector<int32_t>> tokens_by_importance;  // their kept tokens, most important first
    std::vector<float> vectors;                             // [H][m][d] mean keys
  };
  int64_t tau_ = 1024, window_ = 32, sinks_ = 32, recent_ = 32, w_ = 0, retrieve_ = 960;
  double keep_ = 2;
  bool per_sentence_ = false;
  std::vector<int64_t> starts_;
  std::vector<Layer> layers_;
  std::vector<std::vector<int32_t>> current_;  // [l * H + h] retrieved tokens, sorted
  bool have_selection_ = false;
  int64_t sel_start_ = -1;
  double mean_sentence_ = 0, kept_total_ = 0, kept_sentences_ = 0, fetch_sentences_ = 0, fetch_tokens_ = 0, sel_sum_ = 0;
  int64_t fetches_ = 0, steps_ = 0, reselections_ = 0, sel_n_ = 0;
};
}  // namespace

std::unique_ptr<TraceSelector> make_selector(const ParamValues& p) {
  return std::make_unique<SentenceKvSelector>(p);
}

}  // namespace kvsim::policies::sentencekv
