#include "traces/llm/llama.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <thread>

#include "core/error.hpp"
#include "traces/llm/gguf.hpp"

namespace kvsim::llm {

namespace {

std::string dims_text(const std::vector<int64_t>& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + "]";
}

// The tensor `name` as float, checked to have exactly `dims` (GGML order: innermost first).
std::vector<float> load(const GgufFile& f, const std::string& name, const std::vector<int64_t>& dims) {
  const GgufTensor& t = f.tensor(name);
  if (t.dims != dims) f.fail("tensor '" + name + "'", "dims " + dims_text(t.dims) + " (expected " + dims_text(dims) + ")");
  return f.dequantize(t);
}

Eigen::MatrixXf load_matrix(const GgufFile& f, const std::string& name, int64_t in, int64_t out) {
  const std::vector<float> v = load(f, name, {in, out});
  return Eigen::Map<const Eigen::MatrixXf>(v.data(), in, out);
}

Eigen::VectorXf load_vector(const GgufFile& f, const std::string& name, int64_t n) {
  const std::vector<float> v = load(f, name, {n});
  return Eigen::Map<const Eigen::VectorXf>(v.data(), n);
}

int positive(const GgufFile& f, const std::string& key, int64_t v, int64_t max = 1 << 24) {
  if (v < 1 || v > max)
    f.fail("metadata '" + key + "'", std::to_string(v) + " is out of range (allowed: 1 to " + std::to_string(max) + ")");
  return int(v);
}

// x <- x / rms(x) * g, column by column.
void rms_norm(const Eigen::MatrixXf& x, const Eigen::VectorXf& g, float eps, Eigen::MatrixXf& out) {
  out.resize(x.rows(), x.cols());
  for (Eigen::Index j = 0; j < x.cols(); ++j) {
    const float ms = x.col(j).squaredNorm() / float(x.rows());
    out.col(j) = x.col(j).cwiseProduct(g) * (1.0f / std::sqrt(ms + eps));
  }
}

// Rotates pairs (2i, 2i+1) of the first rope_dim dims of every head. GGUF llama weights are stored
// permuted by llama.cpp's converter so that this interleaved pairing is the right one (the HF
// checkpoints pair i with i + d/2 instead).
void rope(Eigen::MatrixXf& x, int heads, int d, int64_t pos0, const Eigen::VectorXf& inv_freq, double scale) {
  const int half = int(inv_freq.size());
  for (Eigen::Index j = 0; j < x.cols(); ++j) {
    const double p = double(pos0 + j) / scale;
    for (int i = 0; i < half; ++i) {
      const double a = p * double(inv_freq[i]);
      const float c = float(std::cos(a)), s = float(std::sin(a));
      for (int h = 0; h < heads; ++h) {
        float& x0 = x(h * d + 2 * i, j);
        float& x1 = x(h * d + 2 * i + 1, j);
        const float a0 = x0, a1 = x1;
        x0 = a0 * c - a1 * s;
        x1 = a0 * s + a1 * c;
      }
    }
  }
}

}  // namespace

double log_sum_exp(const Eigen::Ref<const Eigen::VectorXf>& logits) {
  const double mx = logits.maxCoeff();
  double s = 0;
  for (Eigen::Index i = 0; i < logits.size(); ++i) s += std::exp(double(logits[i]) - mx);
  return mx + std::log(s);
}

// ---- loading --------------------------------------------------------------------------------------

LlamaModel::LlamaModel(const std::string& path) : path_(path) {
  GgufFile f(path);
  const std::string arch = f.get_string("general.architecture");
  if (arch != "llama") f.fail("metadata 'general.architecture'", "'" + arch + "' is not supported (allowed: llama)");
  tok_ = std::make_unique<Tokenizer>(f);

  LlamaConfig& c = cfg_;
  c.name = f.get_string("general.name", "");
  c.n_layer = positive(f, "llama.block_count", f.get_int("llama.block_count"), 1024);
  c.n_embd = positive(f, "llama.embedding_length", f.get_int("llama.embedding_length"));
  c.n_head = positive(f, "llama.attention.head_count", f.get_int("llama.attention.head_count"), 4096);
  c.n_head_kv = positive(f, "llama.attention.head_count_kv", f.get_int("llama.attention.head_count_kv", c.n_head), 4096);
  c.n_ff = positive(f, "llama.feed_forward_length", f.get_int("llama.feed_forward_length"));
  c.n_ctx_train = int(f.get_int("llama.context_length", 0));
  if (c.n_embd % c.n_head != 0)
    f.fail("metadata 'llama.attention.head_count'", std::to_string(c.n_head) + " does not divide embedding_length " + std::to_string(c.n_embd));
  if (c.n_head % c.n_head_kv != 0)
    f.fail("metadata 'llama.attention.head_count_kv'", std::to_string(c.n_head_kv) + " does not divide head_count " + std::to_string(c.n_head));
  c.head_dim = c.n_embd / c.n_head;
  if (f.has("llama.attention.key_length") && f.get_int("llama.attention.key_length") != c.head_dim)
    f.fail("metadata 'llama.attention.key_length'", std::to_string(f.get_int("llama.attention.key_length")) +
                                                        " differs from embedding_length / head_count = " + std::to_string(c.head_dim) + " (not supported)");
  c.rope_dim = int(f.get_int("llama.rope.dimension_count", c.head_dim));
  if (c.rope_dim < 2 || c.rope_dim > c.head_dim || c.rope_dim % 2)
    f.fail("metadata 'llama.rope.dimension_count'", std::to_string(c.rope_dim) + " is not allowed (an even number from 2 to head_dim " + std::to_string(c.head_dim) + ")");
  c.rope_theta = f.get_float("llama.rope.freq_base", 10000.0);
  if (!(c.rope_theta > 1.0) || !std::isfinite(c.rope_theta))
    f.fail("metadata 'llama.rope.freq_base'", std::to_string(c.rope_theta) + " is not allowed (a finite number > 1)");
  c.rms_eps = f.get_float("llama.attention.layer_norm_rms_epsilon", 1e-5);
  if (!(c.rms_eps > 0.0 && c.rms_eps < 1.0))
    f.fail("metadata 'llama.attention.layer_norm_rms_epsilon'", std::to_string(c.rms_eps) + " is not allowed (0 < eps < 1)");
  // Only linear position scaling is implemented; YaRN and friends change attention too, so refuse
  // them rather than produce a subtly different model.
  const std::string scaling = f.get_string("llama.rope.scaling.type", "none");
  if (scaling == "linear") {
    c.rope_scale = f.get_float("llama.rope.scaling.factor");
    if (!(c.rope_scale >= 1.0 && c.rope_scale <= 1024))
      f.fail("metadata 'llama.rope.scaling.factor'", std::to_string(c.rope_scale) + " is not allowed (1 to 1024)");
  } else if (scaling != "none") {
    f.fail("metadata 'llama.rope.scaling.type'", "'" + scaling + "' is not supported (allowed: none, linear)");
  }
  if (f.has("llama.rope.scale_linear")) c.rope_scale = f.get_float("llama.rope.scale_linear");

  c.n_vocab = int(f.get_int("llama.vocab_size", tok_->vocab_size()));
  if (c.n_vocab != tok_->vocab_size())
    f.fail("metadata 'llama.vocab_size'", std::to_string(c.n_vocab) + " differs from the " + std::to_string(tok_->vocab_size()) + " tokens of 'tokenizer.ggml.tokens'");

  const int64_t E = c.n_embd, D = c.head_dim, F = c.n_ff;
  w_.token_embd = load_matrix(f, "token_embd.weight", E, c.n_vocab);
  w_.layers.resize(size_t(c.n_layer));
  for (int l = 0; l < c.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    LlamaLayerWeights& L = w_.layers[size_t(l)];
    L.attn_norm = load_vector(f, p + "attn_norm.weight", E);
    L.ffn_norm = load_vector(f, p + "ffn_norm.weight", E);
    L.wq = load_matrix(f, p + "attn_q.weight", E, c.n_head * D);
    L.wk = load_matrix(f, p + "attn_k.weight", E, c.n_head_kv * D);
    L.wv = load_matrix(f, p + "attn_v.weight", E, c.n_head_kv * D);
    L.wo = load_matrix(f, p + "attn_output.weight", c.n_head * D, E);
    L.w_gate = load_matrix(f, p + "ffn_gate.weight", E, F);
    L.w_up = load_matrix(f, p + "ffn_up.weight", E, F);
    L.w_down = load_matrix(f, p + "ffn_down.weight", F, E);
  }
  w_.output_norm = load_vector(f, "output_norm.weight", E);
  c.tied_output = f.find_tensor("output.weight") == nullptr;
  if (!c.tied_output) w_.output = load_matrix(f, "output.weight", E, c.n_vocab);

  w_.rope_inv_freq.resize(c.rope_dim / 2);
  for (int i = 0; i < c.rope_dim / 2; ++i) w_.rope_inv_freq[i] = float(std::pow(c.rope_theta, -2.0 * i / c.rope_dim));
  // Llama 3.x stores its frequency-dependent RoPE scaling as per-pair divisors.
  if (const GgufTensor* rf = f.find_tensor("rope_freqs.weight")) {
    const Eigen::VectorXf div = load_vector(f, rf->name, c.rope_dim / 2);
    for (int i = 0; i < c.rope_dim / 2; ++i) {
      if (!(div[i] > 0)) f.fail("tensor 'rope_freqs.weight'", "entry " + std::to_string(i) + " = " + std::to_string(div[i]) + " is not positive");
      w_.rope_inv_freq[i] /= div[i];
    }
  }
}

// ---- running --------------------------------------------------------------------------------------

LlamaSession::LlamaSession(const LlamaModel& m) : m_(m) {
  cache_.resize(size_t(m.config().n_layer));
}

void LlamaSession::reserve(int64_t tokens) {
  const int64_t cap = cache_.empty() ? 0 : cache_[0].k.cols();
  if (tokens <= cap) return;
  const int64_t next = std::max<int64_t>(tokens, std::max<int64_t>(256, cap * 2));
  const int rows = m_.config().n_head_kv * m_.config().head_dim;
  for (LayerCache& c : cache_) {
    c.k.conservativeResize(rows, next);
    c.v.conservativeResize(rows, next);
  }
}

Eigen::MatrixXf LlamaSession::prefill(const std::vector<int32_t>& tokens, bool all_logits, int chunk) {
  if (chunk < 1) throw std::invalid_argument("prefill: chunk must be >= 1");
  const int V = m_.config().n_vocab;
  Eigen::MatrixXf out(V, all_logits ? Eigen::Index(tokens.size()) : Eigen::Index(tokens.empty() ? 0 : 1));
  for (size_t s = 0; s < tokens.size(); s += size_t(chunk)) {
    const int n = int(std::min(tokens.size() - s, size_t(chunk)));
    const bool last = s + size_t(n) == tokens.size();
    if (all_logits) {
      out.middleCols(Eigen::Index(s), n) = forward(tokens.data() + s, n, true);
    } else if (last) {
      out = forward(tokens.data() + s, n, false);
    } else {
      forward(tokens.data() + s, n, false);
    }
  }
  return out;
}

Eigen::VectorXf LlamaSession::decode_step(int32_t token) { return forward(&token, 1, false).col(0); }

Eigen::MatrixXf LlamaSession::forward(const int32_t* toks, int n, bool all_logits) {
  const LlamaConfig& c = m_.config();
  const LlamaWeights& w = m_.weights();
  const int d = c.head_dim, H = c.n_head, Hkv = c.n_head_kv, G = c.group();
  const float eps = float(c.rms_eps), scale = 1.0f / std::sqrt(float(d));
  for (int j = 0; j < n; ++j)
    if (toks[j] < 0 || toks[j] >= c.n_vocab)
      throw std::out_of_range("token id " + std::to_string(toks[j]) + " is outside the vocabulary (0 to " + std::to_string(c.n_vocab - 1) + ")");
  const int64_t pos0 = pos_, T = pos_ + n;
  reserve(T);

  Eigen::MatrixXf x(c.n_embd, n), h, q, k, v, o(H * d, n), g, u, scores;
  for (int j = 0; j < n; ++j) x.col(j) = w.token_embd.col(toks[j]);
  const bool selective = selector_ != nullptr && n == 1;

  for (int l = 0; l < c.n_layer; ++l) {
    const LlamaLayerWeights& L = w.layers[size_t(l)];
    rms_norm(x, L.attn_norm, eps, h);
    project(L.wq, h, q, false);
    project(L.wk, h, k, false);
    project(L.wv, h, v, false);
    rope(q, H, d, pos0, w.rope_inv_freq, c.rope_scale);
    rope(k, Hkv, d, pos0, w.rope_inv_freq, c.rope_scale);
    if (observer_) observer_->on_layer(l, pos0, q, k, v);
    cache_[size_t(l)].k.middleCols(pos0, n) = k;
    cache_[size_t(l)].v.middleCols(pos0, n) = v;
    const Eigen::MatrixXf& K = cache_[size_t(l)].k;
    const Eigen::MatrixXf& Vc = cache_[size_t(l)].v;

    // Full causal attention of query head hq over the cache, into its rows of o; `sc` is scratch.
    auto attend = [&](int hq, Eigen::MatrixXf& sc) {
      const int kh = hq / G;
      sc.noalias() = (K.block(kh * d, 0, d, T).transpose() * q.block(hq * d, 0, d, n)) * scale;  // [T, n]
      for (int j = 0; j < n; ++j) {
        const int64_t valid = pos0 + j + 1;  // causal: keys 0..pos0+j
        auto col = sc.col(j);
        const float mx = col.head(valid).maxCoeff();
        col.head(valid) = (col.head(valid).array() - mx).exp();
        col.head(valid) /= col.head(valid).sum();
        if (valid < T) col.tail(T - valid).setZero();
      }
      o.block(hq * d, 0, d, n).noalias() = Vc.block(kh * d, 0, d, T) * sc;
    };
    if (!selective) {
      // Heads are independent and each is computed the same way whatever the thread count.
      const int t = int(std::min<int64_t>({int64_t(threads_), int64_t(H), T * n / 2048 + 1}));
      if (t <= 1) {
        for (int hq = 0; hq < H; ++hq) attend(hq, scores);
      } else {
        std::vector<LayerCache> bufs(static_cast<size_t>(t));  // per-thread scratch in .k
        std::vector<std::thread> pool;
        for (int wi = 1; wi < t; ++wi)
          pool.emplace_back([&, wi] { for (int hq = wi; hq < H; hq += t) attend(hq, bufs[size_t(wi)].k); });
        for (int hq = 0; hq < H; hq += t) attend(hq, bufs[0].k);
        for (std::thread& th : pool) th.join();
      }
    }
    for (int kh = 0; selective && kh < Hkv; ++kh) {
      if (!selector_->select(l, kh, pos0, keep_)) {
        for (int hq = kh * G; hq < (kh + 1) * G; ++hq) attend(hq, scores);
        continue;
      }
      // Gather the kept keys/values, always including the current token.
      std::sort(keep_.begin(), keep_.end());
      keep_.erase(std::unique(keep_.begin(), keep_.end()), keep_.end());
      if (!keep_.empty() && (keep_.front() < 0 || keep_.back() > pos0))
        throw std::out_of_range("AttentionSelector: token index outside [0, " + std::to_string(pos0) + "]");
      if (keep_.empty() || keep_.back() != pos0) keep_.push_back(pos0);
      const Eigen::Index m = Eigen::Index(keep_.size());
      Eigen::MatrixXf Ks(d, m), Vs(d, m);
      for (Eigen::Index t = 0; t < m; ++t) {
        Ks.col(t) = K.block(kh * d, keep_[size_t(t)], d, 1);
        Vs.col(t) = Vc.block(kh * d, keep_[size_t(t)], d, 1);
      }
      for (int hq = kh * G; hq < (kh + 1) * G; ++hq) {
        Eigen::VectorXf sv = (Ks.transpose() * q.block(hq * d, 0, d, 1)) * scale;
        sv = (sv.array() - sv.maxCoeff()).exp();
        sv /= sv.sum();
        o.block(hq * d, 0, d, 1).noalias() = Vs * sv;
      }
    }
    project(L.wo, o, x, true);

    rms_norm(x, L.ffn_norm, eps, h);
    project(L.w_gate, h, g, false);
    project(L.w_up, h, u, false);
    g = (g.array() / (1.0f + (-g.array()).exp())) * u.array();  // SiLU(gate) * up
    project(L.w_down, g, x, true);
  }
  pos_ = T;

  Eigen::MatrixXf logits;
  if (all_logits) {
    rms_norm(x, w.output_norm, eps, h);
  } else {
    const Eigen::MatrixXf last = x.col(n - 1);
    rms_norm(last, w.output_norm, eps, h);
  }
  project(w.output_matrix(), h, logits, false);
  return logits;
}

void LlamaSession::set_threads(int threads) {
  if (threads < 1) throw std::invalid_argument("LlamaSession: threads must be >= 1");
  threads_ = threads;
}

// out (+)= W^T x. With several threads each computes a band of output rows (a slice of W's
// columns), so every output element is computed exactly as with one thread on the same slice.
void LlamaSession::project(const Eigen::MatrixXf& W, const Eigen::MatrixXf& x, Eigen::MatrixXf& out, bool accumulate) const {
  const Eigen::Index rows = W.cols();
  if (!accumulate) out.resize(rows, x.cols());
  const int t = int(std::min<Eigen::Index>(threads_, rows / 64));
  auto band = [&](Eigen::Index r0, Eigen::Index rn) {
    if (accumulate) out.middleRows(r0, rn).noalias() += W.middleCols(r0, rn).transpose() * x;
    else out.middleRows(r0, rn).noalias() = W.middleCols(r0, rn).transpose() * x;
  };
  if (t <= 1) {
    band(0, rows);
    return;
  }
  std::vector<std::thread> pool;
  const Eigen::Index per = (rows + t - 1) / t;
  for (int i = 1; i < t; ++i) {
    const Eigen::Index r0 = per * i;
    if (r0 < rows) pool.emplace_back(band, r0, std::min(per, rows - r0));
  }
  band(0, std::min(per, rows));
  for (std::thread& th : pool) th.join();
}

}  // namespace kvsim::llm
