#include "traces/format/trace_info.hpp"

#include <filesystem>

#include "core/dtype.hpp"

namespace kvsim {

double bytes_on_disk(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(path, ec)) return double(fs::file_size(path, ec));
  double total = 0;
  for (const auto& e : fs::directory_iterator(path, ec))
    if (e.is_regular_file() && e.path().extension() == ".safetensors") total += double(e.file_size());
  return total;
}

nlohmann::json info_json(const std::string& path, const TraceSource& t, const TraceProfile* prof) {
  const TraceMeta& m = t.meta();
  const TraceTokens& tk = t.tokens();
  const double d = m.model.head_dim, eb = bytes_of(t.storage_dtype());
  const double kv_bytes = double(m.layers.size()) * double(m.kv_heads.size()) * double(tk.tokens()) * d * eb;
  const double q_bytes = double(m.layers.size()) * double(m.query_heads.size()) * double(tk.steps()) * d * eb;
  int64_t decode = 0;
  for (int64_t p : tk.query_positions) decode += p >= m.prompt_tokens;
  nlohmann::json j = {
      {"schema", "kvsim.trace_info/1"},
      {"path", path},
      {"file_bytes", bytes_on_disk(path)},
      {"model",
       {{"name", m.model.name}, {"layers", m.model.layers}, {"heads", m.model.heads}, {"kv_heads", m.model.kv_heads},
        {"head_dim", m.model.head_dim}, {"rope_theta", m.model.rope_theta}, {"dtype", m.model.dtype}}},
      {"stored",
       {{"layers", m.layers}, {"kv_heads", m.kv_heads}, {"query_heads", m.query_heads},
        {"dtype", std::string(to_string(t.storage_dtype()))}, {"values", t.has_values()}}},
      {"tokens", tk.tokens()},
      {"prompt_tokens", m.prompt_tokens},
      {"generated_tokens", tk.tokens() - m.prompt_tokens},
      {"sentences", m.sentence_starts.size()},
      {"queries", tk.steps()},
      {"decode_queries", decode},
      {"statistics",
       {{"surprisal", !tk.surprisal.empty()}, {"entropy", !tk.entropy.empty()}, {"varentropy", !tk.varentropy.empty()}}},
      {"tensor_bytes", {{"keys", kv_bytes}, {"values", t.has_values() ? kv_bytes : 0.0}, {"queries", q_bytes}}},
      {"source",
       {{"kind", m.source.kind}, {"model", m.source.model}, {"text", m.source.text}, {"command", m.source.command},
        {"seed", m.source.seed}}}};
  if (prof) {
    nlohmann::json cos = nlohmann::json::array();
    for (const auto& c : prof->cosine)
      if (c.pairs > 0) cos.push_back({{"distance", c.distance}, {"cosine", c.cosine}, {"pairs", c.pairs}});
    j["profile"] = {{"layers_sampled", prof->layers_sampled},
                    {"heads_sampled", prof->heads_sampled},
                    {"queries_sampled", prof->queries_sampled},
                    {"decode_queries", prof->decode_queries},
                    {"sink_share", prof->sink_share},
                    {"sink_share_uniform", prof->sink_share_uniform},
                    {"recent_share", prof->recent_share},
                    {"attention_entropy_nats", prof->entropy},
                    {"attention_entropy_ratio", prof->entropy_ratio},
                    {"mass90_fraction", prof->mass90_fraction},
                    {"query_cosine", cos}};
  }
  return j;
}

}  // namespace kvsim
