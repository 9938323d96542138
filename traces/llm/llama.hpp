// A llama-family decoder (RMSNorm, RoPE, grouped-query attention, SwiGLU) on Eigen, loaded from a
// GGUF file. It exists to record real attention traces on a CPU, so it favours clarity and exact
// float32 math over speed: weights are dequantized to float32 once at load and every projection is
// an Eigen SGEMM over a chunk of tokens.
//
// LlamaModel holds the immutable weights; LlamaSession holds one sequence's KV cache and runs it.
// Hooks let trace capture see post-RoPE q/k/v (AttentionObserver) and let a replay restrict which
// cached tokens a decode step attends (AttentionSelector).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <Eigen/Dense>

#include "traces/llm/tokenizer.hpp"

namespace kvsim::llm {

struct LlamaConfig {
  std::string name;       // general.name
  int n_layer = 0;        // llama.block_count
  int n_embd = 0;         // llama.embedding_length
  int n_head = 0;         // llama.attention.head_count
  int n_head_kv = 0;      // llama.attention.head_count_kv
  int head_dim = 0;       // n_embd / n_head
  int n_ff = 0;           // llama.feed_forward_length
  int n_vocab = 0;        // llama.vocab_size or the token list's length
  int n_ctx_train = 0;    // llama.context_length (informative; longer sequences still run)
  int rope_dim = 0;       // llama.rope.dimension_count (default head_dim): leading dims rotated
  double rope_theta = 10000;  // llama.rope.freq_base
  double rope_scale = 1;      // linear position scaling (llama.rope.scaling.factor with type linear)
  double rms_eps = 1e-5;      // llama.attention.layer_norm_rms_epsilon
  bool tied_output = false;   // no output.weight: logits use token_embd
  int group() const { return n_head / n_head_kv; }
};

// Weights in float32. A projection from `in` to `out` features is an Eigen matrix [in, out]
// (column o holds output o's weights: exactly GGUF's row-major [out][in] storage), so y = W^T x.
struct LlamaLayerWeights {
  Eigen::VectorXf attn_norm, ffn_norm;                // [n_embd]
  Eigen::MatrixXf wq, wk, wv, wo;                     // [n_embd, n_head*d], [n_embd, n_kv*d] x2, [n_head*d, n_embd]
  Eigen::MatrixXf w_gate, w_up, w_down;               // [n_embd, n_ff] x2, [n_ff, n_embd]
};
struct LlamaWeights {
  Eigen::MatrixXf token_embd;   // [n_embd, n_vocab]: column t embeds token t
  std::vector<LlamaLayerWeights> layers;
  Eigen::VectorXf output_norm;  // [n_embd]
  Eigen::MatrixXf output;       // [n_embd, n_vocab]; empty when tied to token_embd
  Eigen::VectorXf rope_inv_freq;  // [rope_dim / 2]: theta_i = pos / rope_scale * rope_inv_freq[i]
  const Eigen::MatrixXf& output_matrix() const { return output.size() ? output : token_embd; }
};

class LlamaModel {
 public:
  // Loads and validates hyper-parameters, tokenizer and weights. Throws InputError naming the file
  // and the metadata key or tensor.
  explicit LlamaModel(const std::string& gguf_path);
  const std::string& path() const { return path_; }
  const LlamaConfig& config() const { return cfg_; }
  const LlamaWeights& weights() const { return w_; }
  const Tokenizer& tokenizer() const { return *tok_; }

 private:
  std::string path_;
  LlamaConfig cfg_;
  LlamaWeights w_;
  std::unique_ptr<Tokenizer> tok_;
};

// Sees the post-RoPE projections of every token processed, once per layer per forward call (a
// prefill chunk or a decode step).
class AttentionObserver {
 public:
  virtual ~AttentionObserver() = default;
  // Tokens at positions [pos0, pos0 + n). q: [n_head * d, n] (head h in rows h*d..h*d+d-1);
  // k, v: [n_head_kv * d, n]. Column j is position pos0 + j.
  virtual void on_layer(int layer, int64_t pos0, const Eigen::MatrixXf& q, const Eigen::MatrixXf& k,
                        const Eigen::MatrixXf& v) = 0;
};

// Restricts the cached tokens a decode step attends, per (layer, KV head): what a KV-cache policy
// would keep. Not consulted during prefill.
class AttentionSelector {
 public:
  virtual ~AttentionSelector() = default;
  // The decode step at position `pos` (keys 0..pos exist). Return false for full attention, or fill
  // `keep` with token indices in [0, pos] and return true; the current token (pos) is always
  // attended, added when missing. Every query head of the KV head's group uses the same set.
  virtual bool select(int layer, int kv_head, int64_t pos, std::vector<int64_t>& keep) = 0;
};

class LlamaSession {
 public:
  explicit LlamaSession(const LlamaModel& model);
  void set_observer(AttentionObserver* o) { observer_ = o; }
  void set_selector(AttentionSelector* s) { selector_ = s; }
  // Threads for the weight products (default 1). Each thread computes a band of output rows;
  // results can differ from one thread in the last bits (Eigen blocks the smaller products
  // differently), so captures to be compared bit for bit use the same count.
  void set_threads(int threads);
  int threads() const { return threads_; }
  const LlamaModel& model() const { return m_; }

  int64_t position() const { return pos_; }  // tokens in the cache
  void reset() { pos_ = 0; }

  // Appends `tokens` to the sequence, `chunk` tokens per forward pass. Returns logits
  // [n_vocab, tokens.size()] when `all_logits` (column j predicts the token after tokens[j]), else
  // [n_vocab, 1] for the last token. Token ids must be < n_vocab (std::out_of_range otherwise).
  Eigen::MatrixXf prefill(const std::vector<int32_t>& tokens, bool all_logits = false, int chunk = 128);
  // One token; its logits. Consults the selector, when set.
  Eigen::VectorXf decode_step(int32_t token);

  // The cache of one layer: [n_head_kv * d, capacity]; columns [0, position()) are valid, post-RoPE.
  const Eigen::MatrixXf& cache_keys(int layer) const { return cache_[size_t(layer)].k; }
  const Eigen::MatrixXf& cache_values(int layer) const { return cache_[size_t(layer)].v; }

 private:
  const LlamaModel& m_;
  AttentionObserver* observer_ = nullptr;
  AttentionSelector* selector_ = nullptr;
  int64_t pos_ = 0;
  // One layer's cache: K and V, [n_head_kv * d, capacity].
  struct LayerCache {
    Eigen::MatrixXf k, v;
  };
  std::vector<LayerCache> cache_;
  std::vector<int64_t> keep_;
  int threads_ = 1;
  void project(const Eigen::MatrixXf& W, const Eigen::MatrixXf& x, Eigen::MatrixXf& out, bool accumulate) const;
  Eigen::MatrixXf forward(const int32_t* tokens, int n, bool all_logits);
  void reserve(int64_t tokens);
};

// Softmax statistics of a logit vector: log-probabilities are logits - logsumexp.
double log_sum_exp(const Eigen::Ref<const Eigen::VectorXf>& logits);

}  // namespace kvsim::llm
