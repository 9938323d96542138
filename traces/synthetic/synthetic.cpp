#include "traces/synthetic/synthetic.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.hpp"
#include "traces/synthetic/counter_rng.hpp"
#include "traces/format/half.hpp"

namespace kvsim {

namespace {

// Stream ids: every random quantity draws from its own stream, so adding one never shifts another.
enum Stream : uint64_t {
  kSentenceLength = 1, kTopicChain, kTokenId, kSurprisal, kEntropy, kHeadType, kTopicDir, kRecencyDir,
  kSinkDir, kValueDir, kKeyNoise, kValueNoise, kQueryNoise, kGqaNoise, kWanderFreq, kWanderMix,
};

// Token ids follow the Llama-3 / GPT-2 BPE vocabularies, so tools that look for sentence ends by id
// or by decoded text both work: 13 is ".", 128000 is <|begin_of_text|>.
constexpr int32_t kPeriodId = 13, kBosId = 128000;
constexpr int32_t kCommonWords = 1000, kCommonWordsEnd = 3000;  // shared function words
constexpr int32_t kTopicWords = 3000, kWordsPerTopic = 400;       // each topic's own vocabulary

// The slowly wandering query component: kWanderLatents independent processes per query head, each a
// random-Fourier sum of kWanderFeatures cosines with Cauchy-distributed frequencies. A Cauchy(0, l)
// spectrum is the Fourier transform of exp(-l |dt|), so each process has correlation
// E[z(p) z(p + dt)] = exp(-l |dt|) = query_ar^|dt| — AR(1)'s — yet is a pure function of p.
constexpr int kWanderLatents = 8, kWanderFeatures = 16;

float round_to(DType t, float x) {
  if (t == DType::bf16) return bf16_to_float(float_to_bf16(x));
  if (t == DType::fp16) return fp16_to_float(float_to_fp16(x));
  return x;
}

void round_rows(DType t, float* x, size_t n) {
  if (t == DType::fp32) return;
  for (size_t i = 0; i < n; ++i) x[i] = round_to(t, x[i]);
}

// Gamma(shape 2) with the given mean: light-tailed enough that surprisal inside sentences rarely
// crosses SEKV's mu + alpha sigma threshold, while sentence starts do.
double gamma2(uint64_t w1, uint64_t w2, double mean) {
  return -0.5 * mean * (std::log(rng::uniform_open(w1)) + std::log(rng::uniform_open(w2)));
}

}  // namespace

// ------------------------------------------------------------------------------------------------
// Construction

SyntheticTrace::SyntheticTrace(SyntheticConfig cfg) : cfg_(std::move(cfg)), rope_(cfg_.head_dim, cfg_.rope_theta) {
  validate_synthetic_config(cfg_, cfg_.preset.empty() ? "synthetic config" : cfg_.preset);
  const int n = cfg_.head_dim / 2;
  const int64_t T = cfg_.prompt_tokens + cfg_.generated_tokens;
  if (cfg_.content_pairs > 0) {
    content_pairs_ = cfg_.content_pairs;
  } else {  // the lowest-frequency pairs below the sink pair that turn at most 1 rad over the whole trace
    int c = 0;
    for (int i = n - 2; i >= 0 && rope_frequency(i, cfg_.head_dim, cfg_.rope_theta) * double(T) <= 1.0; --i) ++c;
    const int cap = std::max(1, n / 2);
    content_pairs_ = std::clamp(c, std::min(4, cap), cap);
    if (cfg_.recency_pairs > 0) content_pairs_ = std::min(content_pairs_, n - 1 - cfg_.recency_pairs);
  }
  recency_pairs_ = cfg_.recency_pairs > 0 ? cfg_.recency_pairs : auto_recency_pairs();

  TraceModel& mo = meta_.model;
  mo.name = cfg_.model_name;
  mo.layers = cfg_.layers;
  mo.heads = cfg_.heads;
  mo.kv_heads = cfg_.kv_heads;
  mo.head_dim = cfg_.head_dim;
  mo.rope_theta = cfg_.rope_theta;
  mo.dtype = cfg_.model_dtype;
  meta_.layers = cfg_.store_layers;
  if (meta_.layers.empty()) {
    meta_.layers.resize(size_t(cfg_.layers));
    std::iota(meta_.layers.begin(), meta_.layers.end(), 0);
  }
  meta_.kv_heads = cfg_.store_kv_heads;
  if (meta_.kv_heads.empty()) {
    meta_.kv_heads.resize(size_t(cfg_.kv_heads));
    std::iota(meta_.kv_heads.begin(), meta_.kv_heads.end(), 0);
  }
  const int group = cfg_.heads / cfg_.kv_heads;
  for (int kv : meta_.kv_heads)
    for (int g = 0; g < group; ++g) meta_.query_heads.push_back(kv * group + g);
  meta_.prompt_tokens = cfg_.prompt_tokens;
  meta_.source.kind = "synthetic";
  meta_.source.model = cfg_.model_name;
  meta_.source.text = cfg_.preset.empty() ? "synthetic" : cfg_.preset;
  meta_.source.seed = int64_t(cfg_.seed & 0x7fffffffffffffffull);
  meta_.source.command = cfg_.command;

  build_text();
  build_heads();
  validate_trace(meta_, tokens_, meta_.source.text);
}

// The fast pairs the recency window is made of (see build_heads), as many as fit below the content:
// those turning >= 1/(8 W) rad per token, for the widest window W of any layer group (a narrower window
// leaves the slowest of them nearly empty).
int SyntheticTrace::auto_recency_pairs() const {
  const int n = cfg_.head_dim / 2;
  double window = cfg_.recency_window;
  for (const LayerGroup& g : cfg_.layer_groups)
    for (const auto& [name, v] : g.knobs)
      if (name == "recency_window") window = std::max(window, v);
  int r = 0;
  while (r < n && rope_frequency(r, cfg_.head_dim, cfg_.rope_theta) >= 1.0 / (8.0 * window)) ++r;
  return std::clamp(r, 1, n - 1 - content_pairs_);
}

// Sentences, topics, needles, token ids and the per-token statistics: one pass over T.
void SyntheticTrace::build_text() {
  const SyntheticConfig& c = cfg_;
  const uint64_t s = c.seed;
  const int64_t P = c.prompt_tokens, T = P + c.generated_tokens;
  topic_.assign(size_t(T), 0);
  std::vector<uint8_t> topic_change(size_t(T), 0);  // sentence starts whose topic differs from the last one
  int64_t sentence = 0;                              // sentence counter, the RNG coordinate
  int topic = int(rng::word(rng::key(s, kTopicChain), 0) % uint64_t(c.topics));
  int last_topic = topic;

  // Appends one sentence [t, t + len) of topic `tp`.
  auto emit = [&](int64_t t, int64_t len, int tp) {
    meta_.sentence_starts.push_back(t);
    for (int64_t i = t; i < t + len; ++i) topic_[size_t(i)] = uint16_t(tp);
    if (t > 0 && tp != last_topic) topic_change[size_t(t)] = 1;
    last_topic = tp;
    ++sentence;
  };
  auto draw_length = [&]() -> int64_t {
    const uint64_t k = rng::key(s, kSentenceLength, uint64_t(sentence));
    const double sp = c.sentence_spread;
    const double mu = std::log(c.mean_sentence_tokens) - 0.5 * sp * sp;  // lognormal with that mean
    const double len = std::exp(mu + sp * rng::normal(rng::word(k, 0), rng::word(k, 1)));
    return std::max<int64_t>(2, int64_t(std::llround(len)));
  };
  // Moves the topic chain one sentence on: stay with probability `stay`, else jump to another topic.
  auto step_topic = [&](double stay) {
    const uint64_t k = rng::key(s, kTopicChain, uint64_t(sentence));
    if (c.topics > 1 && rng::uniform(rng::word(k, 0)) >= stay)
      topic = int((uint64_t(topic) + 1 + rng::word(k, 1) % uint64_t(c.topics - 1)) % uint64_t(c.topics));
  };
  // Fills [from, to) with sentences of the topic chain; the last one is cut to end exactly at `to`
  // (a 1-token remainder joins the sentence before it).
  auto fill = [&](int64_t from, int64_t to, double stay) {
    int64_t t = from;
    bool first = true;
    while (t < to) {
      if (!first || t > 0) step_topic(stay);
      first = false;
      int64_t len = std::min(draw_length(), to - t);
      if (to - (t + len) == 1) ++len;
      emit(t, len, topic);
      t += len;
    }
  };

  // Needle starts: at their depth, pushed past the sinks and any earlier needle, and kept clear of the
  // question window (validate_synthetic_config checks they fit).
  std::vector<size_t> order(c.needles.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return c.needles[a].depth < c.needles[b].depth; });
  needle_spans_.assign(c.needles.size(), {0, 0});
  int64_t cursor = 0;
  int64_t reserved = 0;
  for (const auto& nd : c.needles) reserved += nd.length;
  for (size_t idx : order) {
    const NeedleSpec& nd = c.needles[idx];
    reserved -= nd.length;
    int64_t start = int64_t(std::floor(nd.depth * double(P)));
    start = std::max({start, cursor, int64_t(c.sink_tokens)});
    start = std::min(start, P - c.obs_window - nd.length - reserved);
    fill(cursor, start, c.topic_stickiness);
    // The needle: sentences of mean length, all of its own topic.
    const int ntopic = c.topics + int(idx);
    const int64_t chunk = std::max<int64_t>(2, std::llround(c.mean_sentence_tokens));
    for (int64_t t = start; t < start + nd.length;) {
      int64_t len = std::min(chunk, start + nd.length - t);
      if (start + nd.length - (t + len) == 1) ++len;
      emit(t, len, ntopic);
      t += len;
    }
    needle_spans_[idx] = {start, start + nd.length};
    cursor = start + nd.length;
  }
  fill(cursor, P, c.topic_stickiness);
  // Generation: a new sentence starts at P; topics change per sentence with the probability that
  // gives one change every drift_steps tokens on average.
  const double change = std::min(1.0, c.mean_sentence_tokens / c.drift_steps);
  fill(P, T, 1.0 - change);

  build_token_stats(topic_change);
}

// Token ids (by sentence position and topic), surprisal, entropy and the query positions: one pass over T.
void SyntheticTrace::build_token_stats(const std::vector<uint8_t>& topic_change) {
  const SyntheticConfig& c = cfg_;
  const uint64_t s = c.seed;
  const int64_t P = c.prompt_tokens, T = P + c.generated_tokens;
  TraceTokens& tk = tokens_;
  tk.token_ids.resize(size_t(T));
  tk.surprisal.resize(size_t(T));
  std::vector<uint8_t> is_start(size_t(T), 0), is_end(size_t(T), 0);
  for (size_t i = 0; i < meta_.sentence_starts.size(); ++i) {
    is_start[size_t(meta_.sentence_starts[i])] = 1;
    const int64_t next = i + 1 < meta_.sentence_starts.size() ? meta_.sentence_starts[i + 1] : T;
    is_end[size_t(next - 1)] = 1;
  }
  const uint64_t kid = rng::key(s, kTokenId), ksu = rng::key(s, kSurprisal);
  for (int64_t t = 0; t < T; ++t) {
    const uint64_t w = rng::word(kid, uint64_t(t));
    int32_t id;
    if (t == 0) id = kBosId;
    else if (is_end[size_t(t)]) id = kPeriodId;
    else if ((w & 0xff) < 80) id = kCommonWords + int32_t((w >> 8) % uint64_t(kCommonWordsEnd - kCommonWords));
    else id = kTopicWords + topic_[size_t(t)] * kWordsPerTopic + int32_t((w >> 8) % uint64_t(kWordsPerTopic));
    tk.token_ids[size_t(t)] = id;
    const uint64_t a = rng::word(ksu, 3 * uint64_t(t)), b = rng::word(ksu, 3 * uint64_t(t) + 1),
                   e = rng::word(ksu, 3 * uint64_t(t) + 2);
    double su;
    if (t == 0) su = 0;  // the format's convention: nothing precedes token 0
    else if (is_start[size_t(t)])
      su = std::max(0.0, c.surprisal_start + (topic_change[size_t(t)] ? 1.5 : 0.0) + rng::normal(a, b));
    else su = gamma2(a, e, c.surprisal_inside);
    tk.surprisal[size_t(t)] = float(su);
  }
  const int64_t G = T - P;
  tk.entropy.resize(size_t(G));
  tk.varentropy.resize(size_t(G));
  const uint64_t ken = rng::key(s, kEntropy);
  for (int64_t i = 0; i < G; ++i) {
    const int64_t t = P + i;
    const uint64_t a = rng::word(ken, 3 * uint64_t(i)), b = rng::word(ken, 3 * uint64_t(i) + 1),
                   v = rng::word(ken, 3 * uint64_t(i) + 2);
    double h;
    if (topic_change[size_t(t)]) h = c.entropy_spike * (0.8 + 0.4 * rng::uniform(a));      // topic change: spike
    else if (is_start[size_t(t)]) h = c.entropy_base + 0.25 * (c.entropy_spike - c.entropy_base) * rng::uniform(a);
    else h = gamma2(a, b, c.entropy_base);                                                   // ordinary token
    tk.entropy[size_t(i)] = float(h);
    // Varentropy grows with entropy: a flat distribution over a few candidates has both high.
    tk.varentropy[size_t(i)] = float(h * (1.0 + 0.6 * rng::uniform(v)));
  }
  for (int64_t p = P - c.obs_window; p < T; ++p) tk.query_positions.push_back(p);
}

// Head types and the per-(layer, kv head) direction tables of the stored heads.
void SyntheticTrace::build_heads() {
  const SyntheticConfig& top = cfg_;
  const uint64_t s = top.seed;
  const int d = top.head_dim, n = d / 2;
  const double sd = std::sqrt(double(d));
  choose_retrieval_heads();

  const int K = top.topics + int(top.needles.size());
  const int cd = 2 * content_pairs_;
  // A magnitude pair with a_q * a_k / sqrt(d) = strength: keys get sqrt(strength * sqrt(d)) (or, for a
  // strength of zero, nothing), queries whatever is needed for their head type's share of it.
  auto key_mag = [&](double strength) { return float(std::sqrt(std::max(strength, 0.0) * sd)); };
  auto query_mag = [&](double effective, float k) { return k > 0 ? float(effective * sd / k) : 0.0f; };
  heads_.clear();
  for (int l : meta_.layers) {
    const SyntheticConfig c = config_for_layer(top, l);
    for (int h : meta_.kv_heads) {
      HeadTables ht;
      ht.retrieval = retrieval_[size_t(l * c.kv_heads + h)] != 0;
      const double main = 1.0, weak = c.weak_factor;
      ht.k_topic = key_mag(c.topic_strength);
      ht.k_needle = key_mag(c.needle_query_strength);
      ht.k_recency = key_mag(c.recency_strength);
      ht.k_sink = key_mag(c.sink_strength);
      ht.q_topic = query_mag(c.topic_strength * (ht.retrieval ? main : weak), ht.k_topic);
      ht.q_needle = ht.retrieval ? query_mag(c.needle_query_strength, ht.k_needle) : 0.0f;
      ht.q_recency = query_mag(c.recency_strength * (ht.retrieval ? weak : main), ht.k_recency);
      // Retrieval heads keep weak_factor of the sink strength unless retrieval_sink says otherwise
      // (real retrieval heads often keep a large sink).
      const double rsink = c.retrieval_sink >= 0 ? c.retrieval_sink : weak;
      ht.q_sink = query_mag(c.sink_strength * (ht.retrieval ? rsink : main), ht.k_sink);

      // Topic directions: Gaussian vectors over the content dims, orthonormalized (needles first, so
      // they are orthogonal to every topic) as long as the dimension allows; later ones are random unit
      // vectors.
      ht.topic_dir.assign(size_t(K) * cd, 0.0f);
      const uint64_t kt = rng::key(s, kTopicDir, uint64_t(l), uint64_t(h));
      std::vector<double> v(static_cast<size_t>(cd));
      std::vector<std::vector<double>> basis;
      for (int j = 0; j < K; ++j) {
        const int slot = j < int(c.needles.size()) ? c.topics + j : j - int(c.needles.size());
        for (int e = 0; e < cd; ++e)
          v[size_t(e)] = rng::normal(rng::word(kt, 2 * (uint64_t(slot) * cd + e)), rng::word(kt, 2 * (uint64_t(slot) * cd + e) + 1));
        if (int(basis.size()) < cd) {
          for (const auto& b : basis) {
            double dot = 0;
            for (int e = 0; e < cd; ++e) dot += v[size_t(e)] * b[size_t(e)];
            for (int e = 0; e < cd; ++e) v[size_t(e)] -= dot * b[size_t(e)];
          }
        }
        double norm = 0;
        for (double x : v) norm += x * x;
        norm = std::sqrt(norm);
        for (auto& x : v) x /= norm;
        if (int(basis.size()) < cd) basis.push_back(v);
        for (int e = 0; e < cd; ++e) ht.topic_dir[size_t(slot) * cd + e] = float(v[size_t(e)]);
      }
      // Recency: queries carry the same vector r as keys, so the post-RoPE dot product is the kernel
      // K(dt) = sum_i |r_i|^2 cos(dt w_i): 1 at distance 0, falling as the pairs drift out of phase.
      // Choosing |r_i|^2 proportional to w_i exp(-W w_i) samples the spectrum of the Lorentzian
      // window W^2 / (W^2 + dt^2) on RoPE's geometric frequency grid (weight per log-frequency step =
      // spectral density x w), so K is about 1/2 at dt = W = recency_window. Each head scales its pairs
      // by a random factor in [0.5, 1.5) and takes random phases, for variety between heads.
      ht.recency.assign(size_t(d), 0.0f);
      const uint64_t kr = rng::key(s, kRecencyDir, uint64_t(l), uint64_t(h));
      std::vector<double> w(static_cast<size_t>(recency_pairs_));
      double wsum = 0;
      for (int i = 0; i < recency_pairs_; ++i) {
        const double f = rope_frequency(i, d, c.rope_theta);
        w[size_t(i)] = f * std::exp(-c.recency_window * f) * (0.5 + rng::uniform(rng::word(kr, 2 * uint64_t(i))));
        wsum += w[size_t(i)];
      }
      for (int i = 0; i < recency_pairs_; ++i) {
        const double a = std::sqrt(w[size_t(i)] / wsum);
        const double ph = 6.283185307179586 * rng::uniform(rng::word(kr, 2 * uint64_t(i) + 1));
        ht.recency[size_t(i)] = float(a * std::cos(ph));
        ht.recency[size_t(i + n)] = float(a * std::sin(ph));
      }
      // recency_decay: all queries sit at or after the question window's first position q0, so a key
      // more than a few windows before q0 is never recent to any of them; there the kernel above no
      // longer falls but oscillates (about +-0.5 of its peak at 1K-8K tokens), giving the sinks and old
      // tokens a boost or penalty that depends on T. Fading it out is a pure function of position.
      if (c.recency_decay) {
        const int64_t q0 = c.prompt_tokens - c.obs_window;
        ht.recency_full = q0 - int64_t(std::ceil(4 * c.recency_window));
        ht.recency_none = q0 - int64_t(std::ceil(8 * c.recency_window));
      }
      const double phase = 6.283185307179586 * rng::uniform(rng::word(rng::key(s, kSinkDir, uint64_t(l), uint64_t(h)), 0));
      ht.sink[0] = float(std::cos(phase));
      ht.sink[1] = float(std::sin(phase));
      // Values: each topic has a direction; tokens add their topic's, so attention output reflects
      // which topics were attended.
      ht.value_dir.resize(size_t(K) * d);
      const uint64_t kv = rng::key(s, kValueDir, uint64_t(l), uint64_t(h));
      for (size_t i = 0; i < ht.value_dir.size(); ++i) ht.value_dir[i] = rng::fast_normal(rng::word(kv, i));
      ht.key_noise = c.key_noise;
      ht.value_noise = c.value_noise;
      ht.value_topic = c.value_topic;
      ht.query_ar = c.query_ar;
      ht.query_wander = c.query_wander;
      ht.query_noise = c.query_noise;
      heads_.push_back(std::move(ht));
    }
  }
}

// Retrieval heads: in each layer group (and among the layers no group covers) exactly round(fraction x
// its (layer, kv head) pairs) of them, at least one when the fraction is > 0, chosen by one seeded
// ranking of all model heads so the choice does not depend on what is stored. Without layer groups
// this is round(retrieval_heads x L x Hkv) of the whole model.
void SyntheticTrace::choose_retrieval_heads() {
  const SyntheticConfig& c = cfg_;
  const int pairs = c.layers * c.kv_heads;
  std::vector<int> rank(static_cast<size_t>(pairs));
  std::iota(rank.begin(), rank.end(), 0);
  const uint64_t kh = rng::key(c.seed, kHeadType);
  std::sort(rank.begin(), rank.end(), [&](int a, int b) {
    const uint64_t wa = rng::word(kh, uint64_t(a)), wb = rng::word(kh, uint64_t(b));
    return wa != wb ? wa < wb : a < b;
  });
  // Which set each layer belongs to: group i, or the uncovered rest (the last set).
  const int sets = int(c.layer_groups.size()) + 1;
  std::vector<int> set_of(static_cast<size_t>(c.layers), sets - 1);
  std::vector<double> fraction(static_cast<size_t>(sets), c.retrieval_heads);
  std::vector<int> members(static_cast<size_t>(sets), 0);
  for (int g = 0; g < sets - 1; ++g) {
    const LayerGroup& lg = c.layer_groups[size_t(g)];
    for (int l = lg.first; l <= lg.last; ++l) set_of[size_t(l)] = g;
    for (const auto& [name, v] : lg.knobs)
      if (name == "retrieval_heads") fraction[size_t(g)] = v;
  }
  for (int l = 0; l < c.layers; ++l) members[size_t(set_of[size_t(l)])] += c.kv_heads;
  std::vector<int> left(static_cast<size_t>(sets));
  for (int g = 0; g < sets; ++g) {
    left[size_t(g)] = int(std::lround(fraction[size_t(g)] * members[size_t(g)]));
    if (fraction[size_t(g)] > 0 && members[size_t(g)] > 0) left[size_t(g)] = std::max(left[size_t(g)], 1);
  }
  retrieval_.assign(size_t(pairs), 0);
  for (int p : rank) {
    int& want = left[size_t(set_of[size_t(p / c.kv_heads)])];
    if (want > 0) {
      retrieval_[size_t(p)] = 1;
      --want;
    }
  }
}

bool SyntheticTrace::is_retrieval_head(int layer, int kv_head) const {
  return retrieval_.at(size_t(layer * cfg_.kv_heads + kv_head)) != 0;
}

const SyntheticTrace::HeadTables& SyntheticTrace::head(int layer_slot, int kv_slot) const {
  if (layer_slot < 0 || layer_slot >= int(meta_.layers.size()) || kv_slot < 0 || kv_slot >= int(meta_.kv_heads.size()))
    throw std::out_of_range("SyntheticTrace: slot out of range");
  return heads_[size_t(layer_slot) * meta_.kv_heads.size() + size_t(kv_slot)];
}

// ------------------------------------------------------------------------------------------------
// Keys and values

void SyntheticTrace::key_rows(int ls, int hs, int64_t t0, int64_t t1, float* out, bool rotate) const {
  const int64_t T = tokens_.tokens();
  if (t0 < 0 || t1 < t0 || t1 > T) throw std::out_of_range("SyntheticTrace::keys: range outside 0 .. T");
  const HeadTables& ht = head(ls, hs);
  const int d = cfg_.head_dim, n = d / 2, cp = content_pairs_, cd = 2 * cp, rp = recency_pairs_;
  const int c0 = n - 1 - cp;  // first content pair
  const float noise = float(ht.key_noise);
  const uint64_t kn = rng::key(cfg_.seed, kKeyNoise, uint64_t(meta_.layers[size_t(ls)]), uint64_t(meta_.kv_heads[size_t(hs)]));
  std::vector<float> cs;
  constexpr int64_t kChunk = RopeTable::kBlock;
  for (int64_t a = t0; a < t1; a += kChunk) {
    const int64_t b = std::min(t1, a + kChunk);
    for (int64_t t = a; t < b; ++t) {
      float* row = out + size_t(t - t0) * d;
      const uint64_t base = uint64_t(t) * uint64_t(d);
      for (int j = 0; j < d; ++j) row[j] = noise * rng::fast_normal(rng::word(kn, base + uint64_t(j)));
      const int tp = topic_[size_t(t)];
      // A sink without its sentence's topic: else every query on the first sentence's topic adds the
      // topic boost to the sinks' own, and the sink share jumps with whichever topic the decode is on.
      const float mag = (t < cfg_.sink_tokens && !cfg_.sink_topic) ? 0.0f : tp < cfg_.topics ? ht.k_topic : ht.k_needle;
      const float* dir = &ht.topic_dir[size_t(tp) * cd];
      for (int e = 0; e < cp; ++e) {
        row[c0 + e] += mag * dir[e];
        row[c0 + e + n] += mag * dir[cp + e];
      }
      const float kr = ht.k_recency * ht.recency_fade(t);
      for (int i = 0; i < rp; ++i) {
        row[i] += kr * ht.recency[size_t(i)];
        row[i + n] += kr * ht.recency[size_t(i + n)];
      }
      if (t < cfg_.sink_tokens) {
        row[n - 1] += ht.k_sink * ht.sink[0];
        row[d - 1] += ht.k_sink * ht.sink[1];
      }
    }
    float* rows = out + size_t(a - t0) * d;
    if (rotate) {
      cs.resize(size_t(b - a) * d);
      rope_.angles(a, b, cs.data());
      rope_.rotate_rows(rows, b - a, cs.data());
      round_rows(cfg_.dtype, rows, size_t(b - a) * d);
    }
  }
}

void SyntheticTrace::keys(int ls, int hs, int64_t t0, int64_t t1, float* out) const { key_rows(ls, hs, t0, t1, out, true); }
void SyntheticTrace::pre_rope_keys(int ls, int hs, int64_t t0, int64_t t1, float* out) const {
  key_rows(ls, hs, t0, t1, out, false);
}

void SyntheticTrace::values(int ls, int hs, int64_t t0, int64_t t1, float* out) const {
  if (!cfg_.values) throw std::logic_error("SyntheticTrace::values: this trace has no values (values: false)");
  const int64_t T = tokens_.tokens();
  if (t0 < 0 || t1 < t0 || t1 > T) throw std::out_of_range("SyntheticTrace::values: range outside 0 .. T");
  const HeadTables& ht = head(ls, hs);
  const int d = cfg_.head_dim;
  const float noise = float(ht.value_noise), vt = float(ht.value_topic);
  const uint64_t kn = rng::key(cfg_.seed, kValueNoise, uint64_t(meta_.layers[size_t(ls)]), uint64_t(meta_.kv_heads[size_t(hs)]));
  for (int64_t t = t0; t < t1; ++t) {
    float* row = out + size_t(t - t0) * d;
    const float* dir = &ht.value_dir[size_t(topic_[size_t(t)]) * d];
    const uint64_t base = uint64_t(t) * uint64_t(d);
    for (int j = 0; j < d; ++j) row[j] = noise * rng::fast_normal(rng::word(kn, base + uint64_t(j))) + vt * dir[j];
  }
  round_rows(cfg_.dtype, out, size_t(t1 - t0) * d);
}

// ------------------------------------------------------------------------------------------------
// Queries

void SyntheticTrace::query_rows(int ls, int qs, int64_t s0, int64_t s1, float* out, bool rotate) const {
  const int64_t S = tokens_.steps();
  if (s0 < 0 || s1 < s0 || s1 > S) throw std::out_of_range("SyntheticTrace::queries: range outside 0 .. steps");
  const int hs = kv_slot_of_query(qs);
  const HeadTables& ht = head(ls, hs);
  const SyntheticConfig& c = cfg_;
  const int d = c.head_dim, n = d / 2, cp = content_pairs_, cd = 2 * cp, rp = recency_pairs_;
  const int c0 = n - 1 - cp;
  const int layer = meta_.layers[size_t(ls)], qh = meta_.query_heads[size_t(qs)];
  const int K = c.topics + int(c.needles.size());

  // This query head's own view of the topic directions: the KV head's plus a fixed per-head offset
  // (GQA: heads of a group look for the same things, not identically).
  std::vector<float> dir(size_t(K) * cd);
  const uint64_t kg = rng::key(c.seed, kGqaNoise, uint64_t(layer), uint64_t(qh));
  const float gn = float(c.gqa_head_noise / std::sqrt(double(cd)));
  for (size_t i = 0; i < dir.size(); ++i) dir[i] = ht.topic_dir[i] + gn * rng::fast_normal(rng::word(kg, i));
  // The question and every decode query of a retrieval head look for all needles.
  std::vector<float> needle(size_t(cd), 0.0f);
  for (size_t j = 0; j < c.needles.size(); ++j)
    for (int e = 0; e < cd; ++e) needle[size_t(e)] += ht.q_needle * dir[(size_t(c.topics) + j) * cd + e];
  // Wander: frequencies, phases and the mixing matrix into the content dims, per query head.
  const double lambda = -std::log(std::max(ht.query_ar, 1e-12));
  double freq[kWanderLatents][kWanderFeatures], phase[kWanderLatents][kWanderFeatures];
  const uint64_t kw = rng::key(c.seed, kWanderFreq, uint64_t(layer), uint64_t(qh));
  for (int k = 0; k < kWanderLatents; ++k)
    for (int m = 0; m < kWanderFeatures; ++m) {
      const uint64_t i = uint64_t(k * kWanderFeatures + m);
      freq[k][m] = lambda * std::tan(3.141592653589793 * (rng::uniform_open(rng::word(kw, 2 * i)) - 0.5));
      phase[k][m] = 6.283185307179586 * rng::uniform(rng::word(kw, 2 * i + 1));
    }
  std::vector<float> mixm(size_t(cd) * kWanderLatents);
  const uint64_t km = rng::key(c.seed, kWanderMix, uint64_t(layer), uint64_t(qh));
  // Each content element gets unit variance from the latents; the whole component then has norm
  // about q_topic * query_wander.
  const float wscale = float(ht.query_wander * ht.q_topic / std::sqrt(double(cd)) / std::sqrt(double(kWanderLatents)));
  for (size_t i = 0; i < mixm.size(); ++i) mixm[i] = wscale * rng::fast_normal(rng::word(km, i));
  const double wnorm = std::sqrt(2.0 / kWanderFeatures);
  const uint64_t kq = rng::key(c.seed, kQueryNoise, uint64_t(layer), uint64_t(qh));
  const double sink_w = rope_frequency(n - 1, d, c.rope_theta);

  std::vector<float> cs(static_cast<size_t>(d));
  for (int64_t si = s0; si < s1; ++si) {
    const int64_t p = tokens_.query_positions[size_t(si)];
    float* row = out + size_t(si - s0) * d;
    std::fill(row, row + d, 0.0f);
    const int tp = topic_[size_t(p)];
    float z[kWanderLatents];
    for (int k = 0; k < kWanderLatents; ++k) {
      double acc = 0;
      for (int m = 0; m < kWanderFeatures; ++m) acc += std::cos(freq[k][m] * double(p) + phase[k][m]);
      z[k] = float(wnorm * acc);
    }
    for (int e = 0; e < cd; ++e) {
      float v = ht.q_topic * dir[size_t(tp) * cd + e] + needle[size_t(e)];
      for (int k = 0; k < kWanderLatents; ++k) v += mixm[size_t(e) * kWanderLatents + k] * z[k];
      row[e < cp ? c0 + e : c0 + (e - cp) + n] = v;
    }
    for (int i = 0; i < rp; ++i) {
      row[i] = ht.q_recency * ht.recency[size_t(i)];
      row[i + n] = ht.q_recency * ht.recency[size_t(i + n)];
    }
    // Sink: counter-rotated by the query's own position, so after RoPE it lines up with the sink keys
    // (at positions ~0) however far away the query is — the learned absolute-position awareness that
    // lets real models find the first token from anywhere.
    const double ang = -double(p) * sink_w;
    const double sc = std::cos(ang), sn = std::sin(ang);
    row[n - 1] = float(ht.q_sink * (ht.sink[0] * sc - ht.sink[1] * sn));
    row[d - 1] = float(ht.q_sink * (ht.sink[0] * sn + ht.sink[1] * sc));
    double norm2 = 0;
    for (int j = 0; j < d; ++j) norm2 += double(row[j]) * row[j];
    const float qn = float(ht.query_noise * std::sqrt(norm2 / d));
    const uint64_t base = uint64_t(p) * uint64_t(d);
    for (int j = 0; j < d; ++j) row[j] += qn * rng::fast_normal(rng::word(kq, base + uint64_t(j)));
    if (rotate) {
      rope_.angles(p, p + 1, cs.data());
      rope_.rotate_rows(row, 1, cs.data());
      round_rows(c.dtype, row, size_t(d));
    }
  }
}

void SyntheticTrace::queries(int ls, int qs, int64_t s0, int64_t s1, float* out) const {
  query_rows(ls, qs, s0, s1, out, true);
}
void SyntheticTrace::pre_rope_queries(int ls, int qs, int64_t s0, int64_t s1, float* out) const {
  query_rows(ls, qs, s0, s1, out, false);
}

}  // namespace kvsim
