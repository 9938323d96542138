#include "traces/llm/capture.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "core/error.hpp"

namespace kvsim::llm {

namespace {

// Copies the stored layers/heads of every forward pass into flat buffers sized for the longest
// possible sequence; the MemoryTrace is built once the final length is known.
struct Recorder final : AttentionObserver {
  const std::vector<int>& layers;
  const std::vector<int>& kv_heads;
  const std::vector<int>& q_heads;
  int d;
  int64_t t_max, q_first;  // queries are kept for positions >= q_first
  int64_t s_max;
  bool with_values;
  std::vector<int> slot_of_layer;
  std::vector<float> k, v, q;

  Recorder(const std::vector<int>& l, const std::vector<int>& kh, const std::vector<int>& qh, int n_layer, int d_,
           int64_t t_max_, int64_t q_first_, bool values)
      : layers(l), kv_heads(kh), q_heads(qh), d(d_), t_max(t_max_), q_first(q_first_), s_max(t_max_ - q_first_),
        with_values(values), slot_of_layer(size_t(n_layer), -1) {
    for (size_t i = 0; i < layers.size(); ++i) slot_of_layer[size_t(layers[i])] = int(i);
    const size_t kv = layers.size() * kv_heads.size() * size_t(t_max) * size_t(d);
    k.assign(kv, 0.0f);
    if (with_values) v.assign(kv, 0.0f);
    q.assign(layers.size() * q_heads.size() * size_t(s_max) * size_t(d), 0.0f);
  }
  float* kv_row(std::vector<float>& buf, size_t ls, size_t hs, int64_t t) {
    return buf.data() + ((ls * kv_heads.size() + hs) * size_t(t_max) + size_t(t)) * size_t(d);
  }
  float* q_row(size_t ls, size_t hs, int64_t s) {
    return q.data() + ((ls * q_heads.size() + hs) * size_t(s_max) + size_t(s)) * size_t(d);
  }
  void on_layer(int layer, int64_t pos0, const Eigen::MatrixXf& qm, const Eigen::MatrixXf& km,
                const Eigen::MatrixXf& vm) override {
    const int ls = slot_of_layer[size_t(layer)];
    if (ls < 0) return;
    for (Eigen::Index j = 0; j < km.cols(); ++j) {
      const int64_t t = pos0 + j;
      for (size_t hs = 0; hs < kv_heads.size(); ++hs) {
        std::copy_n(&km(kv_heads[hs] * d, j), d, kv_row(k, size_t(ls), hs, t));
        if (with_values) std::copy_n(&vm(kv_heads[hs] * d, j), d, kv_row(v, size_t(ls), hs, t));
      }
      if (t < q_first) continue;
      for (size_t hs = 0; hs < q_heads.size(); ++hs) std::copy_n(&qm(q_heads[hs] * d, j), d, q_row(size_t(ls), hs, t - q_first));
    }
  }
};

// A sorted, unique index list below `bound`, or all of 0..bound-1 when empty.
std::vector<int> index_list(const std::vector<int>& v, int bound, const std::string& field) {
  if (v.empty()) {
    std::vector<int> all(static_cast<size_t>(bound));
    std::iota(all.begin(), all.end(), 0);
    return all;
  }
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i] < 0 || v[i] >= bound)
      throw_input_error("", 0, field, "value " + std::to_string(v[i]) + " is outside 0 .. " + std::to_string(bound - 1));
    if (i > 0 && v[i] <= v[i - 1])
      throw_input_error("", 0, field, "value " + std::to_string(v[i]) + " does not follow " + std::to_string(v[i - 1]) +
                                          "; the list must be strictly increasing");
  }
  return v;
}

struct Dist {
  double logz, entropy, varentropy;
};

// log Z, entropy and varentropy (variance of -log p) of softmax(logits), in double.
Dist stats(const Eigen::VectorXf& logits) {
  const double lz = log_sum_exp(logits);
  double h = 0, h2 = 0;
  for (Eigen::Index i = 0; i < logits.size(); ++i) {
    const double lp = double(logits[i]) - lz;
    const double p = std::exp(lp);
    h -= p * lp;
    h2 += p * lp * lp;
  }
  return {lz, h, std::max(0.0, h2 - h * h)};
}

}  // namespace

std::vector<int64_t> sentence_starts(const Tokenizer& tok, const std::vector<int32_t>& ids) {
  std::vector<int64_t> starts{0};
  bool punct = false, pending = false;
  for (size_t t = 0; t < ids.size(); ++t) {
    for (char ch : tok.token_text(ids[t])) {
      const bool space = ch == ' ' || ch == '\n' || ch == '\t' || ch == '\r';
      if (space) {
        if (punct) pending = true;
        continue;
      }
      if (pending && t > 0 && starts.back() != int64_t(t)) starts.push_back(int64_t(t));
      pending = false;
      punct = ch == '.' || ch == '!' || ch == '?';
    }
  }
  return starts;
}

MemoryTrace capture_trace(const LlamaModel& model, const std::vector<int32_t>& prompt, int gen_tokens,
                          const CaptureOptions& o) {
  const LlamaConfig& c = model.config();
  if (prompt.empty()) throw_input_error("", 0, "capture prompt", "is empty; at least one token is required");
  if (gen_tokens < 0) throw_input_error("", 0, "capture gen_tokens", "value " + std::to_string(gen_tokens) + " is negative");
  if (o.obs_window < 0) throw_input_error("", 0, "capture obs_window", "value " + std::to_string(o.obs_window) + " is negative");
  if (o.obs_window == 0 && gen_tokens == 0)
    throw_input_error("", 0, "capture obs_window", "is 0 and nothing is generated, so no query would be stored");
  if (!(o.temperature >= 0) || !std::isfinite(o.temperature))
    throw_input_error("", 0, "capture temperature", "value " + std::to_string(o.temperature) + " is not allowed (>= 0)");
  const std::vector<int> layers = index_list(o.layers, c.n_layer, "capture layers");
  const std::vector<int> kv_heads = index_list(o.kv_heads, c.n_head_kv, "capture kv_heads");
  std::vector<int> q_heads;
  for (int kh : kv_heads)
    for (int g = 0; g < c.group(); ++g) q_heads.push_back(kh * c.group() + g);

  const int64_t P = int64_t(prompt.size());
  const int64_t t_max = P + gen_tokens;
  const int64_t q_first = std::max<int64_t>(0, P - o.obs_window);
  Recorder rec(layers, kv_heads, q_heads, c.n_layer, c.head_dim, t_max, q_first, o.with_values);

  if (o.threads < 1) throw_input_error("", 0, "capture threads", "value " + std::to_string(o.threads) + " is not allowed (>= 1)");
  LlamaSession s(model);
  s.set_threads(o.threads);
  s.set_observer(&rec);
  TraceTokens tk;
  tk.token_ids = prompt;
  tk.surprisal.assign(size_t(P), 0.0f);
  // Surprisal needs the logits at every prompt position (one vocabulary projection per token); take
  // them a chunk at a time so a long prompt never holds [n_vocab, P] floats at once.
  if (o.chunk < 1) throw_input_error("", 0, "capture chunk", "value " + std::to_string(o.chunk) + " is not allowed (>= 1)");
  Eigen::VectorXf cur;
  for (int64_t c0 = 0; c0 < P; c0 += o.chunk) {
    const int64_t c1 = std::min<int64_t>(P, c0 + o.chunk);
    const Eigen::MatrixXf logits = s.prefill(std::vector<int32_t>(prompt.begin() + c0, prompt.begin() + c1), true, o.chunk);
    for (int64_t t = c0; t < c1; ++t) {
      if (t + 1 < P)  // position t predicts token t + 1
        tk.surprisal[size_t(t + 1)] = float(log_sum_exp(logits.col(t - c0)) - logits(prompt[size_t(t + 1)], t - c0));
    }
    if (c1 == P) cur = logits.col(c1 - 1 - c0);
  }

  std::mt19937_64 rng(o.seed);
  for (int i = 0; i < gen_tokens; ++i) {
    const Dist st = stats(cur);
    int32_t next;
    if (o.temperature == 0) {
      Eigen::Index a;
      cur.maxCoeff(&a);
      next = int32_t(a);
    } else {
      const Eigen::VectorXf z = cur / float(o.temperature);
      const double lz = log_sum_exp(z);
      std::vector<double> p(size_t(z.size()));
      for (Eigen::Index k = 0; k < z.size(); ++k) p[size_t(k)] = std::exp(double(z[k]) - lz);
      next = int32_t(std::discrete_distribution<int32_t>(p.begin(), p.end())(rng));
    }
    tk.token_ids.push_back(next);
    tk.surprisal.push_back(float(st.logz - cur[next]));
    tk.entropy.push_back(float(st.entropy));
    tk.varentropy.push_back(float(st.varentropy));
    // Run the new token so its key, value and query exist; its logits draw the following token.
    cur = s.decode_step(next);
    if (o.stop_at_eos && next == model.tokenizer().eos()) break;
  }
  const int64_t T = tk.tokens();
  for (int64_t p = q_first; p < T; ++p) tk.query_positions.push_back(p);

  TraceMeta m;
  m.model.name = c.name.empty() ? model.path() : c.name;
  m.model.layers = c.n_layer;
  m.model.heads = c.n_head;
  m.model.kv_heads = c.n_head_kv;
  m.model.head_dim = c.head_dim;
  m.model.rope_theta = c.rope_theta;
  m.model.dtype = "fp32";  // the decoder computes in float32 (weights dequantized from the GGUF)
  m.layers = layers;
  m.kv_heads = kv_heads;
  m.query_heads = q_heads;
  m.prompt_tokens = P;
  m.sentence_starts = sentence_starts(model.tokenizer(), tk.token_ids);
  m.source = o.source;
  if (m.source.kind.empty()) m.source.kind = "gguf";
  if (m.source.model.empty()) m.source.model = model.path();

  MemoryTrace trace(std::move(m), std::move(tk), o.with_values, o.dtype);
  const int d = c.head_dim;
  for (size_t ls = 0; ls < layers.size(); ++ls) {
    for (size_t hs = 0; hs < kv_heads.size(); ++hs)
      for (int64_t t = 0; t < T; ++t) {
        std::copy_n(rec.kv_row(rec.k, ls, hs, t), d, trace.key_row(int(ls), int(hs), t));
        if (o.with_values) std::copy_n(rec.kv_row(rec.v, ls, hs, t), d, trace.value_row(int(ls), int(hs), t));
      }
    for (size_t hs = 0; hs < q_heads.size(); ++hs)
      for (int64_t sidx = 0; sidx < T - q_first; ++sidx)
        std::copy_n(rec.q_row(ls, hs, sidx), d, trace.query_row(int(ls), int(hs), sidx));
  }
  return trace;
}

}  // namespace kvsim::llm
