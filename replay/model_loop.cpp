#include "replay/model_loop.hpp"

#include <algorithm>
#include <cmath>

#include "core/error.hpp"
#include "policies/registry.hpp"

namespace kvsim::replay {

namespace {

// The policy's selection, per (model layer, model KV head), for the LlamaSession's decode step.
class Hook final : public llm::AttentionSelector {
 public:
  Hook(TraceSelector& sel, const TraceData& t, int n_layer, int n_head_kv) : sel_(sel), t_(t) {
    const TraceMeta& m = t.source->meta();
    layer_slot_.assign(size_t(n_layer), -1);
    kv_slot_.assign(size_t(n_head_kv), -1);
    for (size_t i = 0; i < m.layers.size(); ++i) layer_slot_[size_t(m.layers[i])] = int(i);
    for (size_t i = 0; i < m.kv_heads.size(); ++i) kv_slot_[size_t(m.kv_heads[i])] = int(i);
    out_.resize(size_t(t.layers) * t.kv_heads);
  }
  bool select(int layer, int kv_head, int64_t pos, std::vector<int64_t>& keep) override {
    if (pos != pos_) {
      pos_ = pos;
      const auto& qp = t_.source->tokens().query_positions;
      const auto it = std::lower_bound(qp.begin(), qp.end(), pos);
      have_ = it != qp.end() && *it == pos && pos >= t_.P;
      if (have_) {
        for (auto& h : out_) h.clear();
        sel_.select(t_, int64_t(it - qp.begin()), out_);
      }
    }
    if (!have_) return false;
    const int l = layer_slot_[size_t(layer)], h = kv_slot_[size_t(kv_head)];
    if (l < 0 || h < 0) return false;
    const HeadSelection& s = out_[size_t(l) * t_.kv_heads + h];
    if (s.all) return false;
    keep.assign(s.tokens.begin(), s.tokens.end());
    for (int32_t x : s.extra_tokens)
      if (x >= 0 && x <= pos) keep.push_back(x);
    std::sort(keep.begin(), keep.end());
    keep.erase(std::unique(keep.begin(), keep.end()), keep.end());
    return true;
  }

 private:
  TraceSelector& sel_;
  const TraceData& t_;
  std::vector<int> layer_slot_, kv_slot_;
  std::vector<HeadSelection> out_;
  int64_t pos_ = -1;
  bool have_ = false;
};

int argmax(const Eigen::VectorXf& v) {
  Eigen::Index i = 0;
  v.maxCoeff(&i);
  return int(i);
}

double nll(const Eigen::VectorXf& logits, int32_t token) { return llm::log_sum_exp(logits) - double(logits[token]); }

}  // namespace

std::vector<ModelLoopResult> run_model_in_the_loop(const llm::LlamaModel& model, const std::string& gguf_path,
                                                   const TraceData& t, const std::vector<PolicyRun>& runs,
                                                   int64_t max_steps, int threads,
                                                   const std::function<void(double)>& progress) {
  const llm::LlamaConfig& c = model.config();
  const TraceModel& tm = t.source->meta().model;
  auto mismatch = [&](const char* field, int64_t model_v, int64_t trace_v) {
    if (model_v != trace_v)
      throw_input_error(gguf_path, 0, field,
                        "the model has " + std::to_string(model_v) + ", the trace's model " + std::to_string(trace_v) +
                            ": model-in-the-loop needs the model that recorded the trace");
  };
  mismatch("layers", c.n_layer, tm.layers);
  mismatch("heads", c.n_head, tm.heads);
  mismatch("kv_heads", c.n_head_kv, tm.kv_heads);
  mismatch("head_dim", c.head_dim, tm.head_dim);
  const auto& ids = t.source->tokens().token_ids;
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] < 0 || ids[i] >= c.n_vocab)
      throw_input_error(gguf_path, 0, "vocab",
                        "trace token " + std::to_string(i) + " has id " + std::to_string(ids[i]) +
                            ", outside the model's vocabulary of " + std::to_string(c.n_vocab));
  if (t.P < 1) throw_input_error(gguf_path, 0, "prompt_tokens", "the trace has no prompt to prefill");

  int64_t end = t.T - 1;  // the last fed token needs a successor
  if (max_steps > 0) end = std::min(end, t.P + max_steps);
  const int64_t steps = std::max<int64_t>(0, end - t.P);

  // Full attention once: its argmax and NLL per step. Then one policy at a time from a copy of the
  // prefilled cache, so memory holds two sessions however many policies (a budget sweep has dozens).
  llm::LlamaSession base(model);
  base.set_threads(threads);
  base.prefill(std::vector<int32_t>(ids.begin(), ids.begin() + t.P));
  std::vector<int> full_argmax;
  std::vector<double> full_nll;
  const double units = double(steps) * double(runs.size() + 1);
  double done = 0;
  {
    llm::LlamaSession full = base;
    for (int64_t p = t.P; p < end; ++p) {
      const Eigen::VectorXf lf = full.decode_step(ids[size_t(p)]);
      full_argmax.push_back(argmax(lf));
      full_nll.push_back(nll(lf, ids[size_t(p + 1)]));
      if (progress && units > 0) progress(++done / units);
    }
  }
  std::vector<ModelLoopResult> res(runs.size());
  for (size_t i = 0; i < runs.size(); ++i) {
    const PolicyRun& r = runs[i];
    res[i].label = r.label.empty() ? r.policy : r.label;
    auto sel = make_selector(r.policy, r.params);
    if (!sel) throw std::logic_error("no trace selector for policy " + r.policy);
    sel->prefill(t);
    Hook hook(*sel, t, c.n_layer, c.n_head_kv);
    llm::LlamaSession session = base;  // the prefilled cache, copied
    session.set_selector(&hook);
    for (int64_t p = t.P; p < end; ++p) {
      const size_t k = size_t(p - t.P);
      const Eigen::VectorXf lp = session.decode_step(ids[size_t(p)]);
      const double np = nll(lp, ids[size_t(p + 1)]);
      const bool agree = argmax(lp) == full_argmax[k];
      res[i].agreement += agree;
      if (!agree && res[i].first_disagreement < 0) res[i].first_disagreement = p - t.P;
      res[i].nll_full += full_nll[k];
      res[i].nll_policy += np;
      res[i].nll_change += np - full_nll[k];
      ++res[i].steps;
      if (progress && units > 0) progress(++done / units);
    }
  }
  for (ModelLoopResult& r : res)
    if (r.steps > 0) {
      const double n = double(r.steps);
      r.agreement /= n;
      r.nll_full /= n;
      r.nll_policy /= n;
      r.nll_change /= n;
    }
  return res;
}

}  // namespace kvsim::replay
