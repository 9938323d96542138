#include "tools/kvsim/trace_cmd.hpp"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "core/units.hpp"
#include "tools/kvsim/progress.hpp"
#include "tools/kvsim/token_span.hpp"
#include "traces/format/profile.hpp"
#include "traces/format/trace_info.hpp"
#include "traces/format/slice.hpp"
#include "traces/synthetic/fit.hpp"
#include "traces/synthetic/synthetic.hpp"
#include "traces/format/trace_file.hpp"
#include "traces/llm/capture.hpp"
#include "traces/llm/model_path.hpp"
#include "traces/llm/gguf.hpp"
#include "traces/llm/text_span.hpp"
#include "traces/llm/tokenizer.hpp"

namespace kvsim {

struct TraceCommands {
  CLI::App* info = nullptr;
  CLI::App* gen = nullptr;
  CLI::App* slice = nullptr;
  CLI::App* capture = nullptr;
  CLI::App* fit = nullptr;
  // info
  std::string path, format = "table";
  bool verify = false, no_profile = false;
  int profile_layers = 4, profile_queries = 32;
  // gen
  std::string preset, config, out, dtype;
  std::vector<std::string> sets;
  int64_t tokens = 0;
  // slice
  std::string layers, kv_heads, steps;
  bool keep_tokens = false;
  // capture
  std::string model, text, needle, question;
  double depth = 0.5;
  int gen_tokens = 64, threads = 2, obs_window = 32;
  int64_t max_prompt_tokens = 0;
  bool chat = false, ignore_eos = false;
  // fit
  std::vector<std::string> fit_paths;
  int fit_groups = 3;
  uint64_t fit_seed = 1;
  std::string fit_needle, fit_needle_tokens;
};

namespace {

// The command as a shell would take it back: arguments with spaces or quotes are single-quoted.
std::string command_line(int argc, char** argv) {
  std::string s;
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    const bool plain = !a.empty() && a.find_first_of(" \t\n'\"$`\\*?;&|<>()") == std::string::npos;
    std::string q = "'";
    for (char ch : a) q += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
    s += (i ? " " : "") + (plain ? a : q + "'");
  }
  return s;
}

DType parse_out_dtype(const std::string& text, DType fallback) {
  if (text.empty()) return fallback;
  DType t;
  if (!parse_dtype(text, t) || t == DType::fp8)
    throw_input_error("command line", 0, "--dtype", "value '" + text + "' is not allowed; traces hold fp32, fp16 or bf16");
  return t;
}

std::string list_text(const std::vector<int>& v, int whole) {
  if (int(v.size()) == whole && whole > 0 && v.front() == 0 && v.back() == whole - 1)
    return "all " + std::to_string(whole);
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return std::to_string(v.size()) + " of " + std::to_string(whole) + " [" + s + "]";
}

std::string human_bytes(double b) {
  char buf[64];
  if (b >= kGiB) std::snprintf(buf, sizeof buf, "%.2f GiB", b / kGiB);
  else if (b >= 1024.0 * 1024.0) std::snprintf(buf, sizeof buf, "%.1f MiB", b / (1024.0 * 1024.0));
  else std::snprintf(buf, sizeof buf, "%.1f KiB", b / 1024.0);
  return buf;
}

std::string info_table(const nlohmann::json& j, const TraceSource& t, const ProfileOptions& po) {
  const TraceMeta& m = t.meta();
  std::string s;
  char buf[512];
  auto line = [&](const char* fmt, auto... args) {
    std::snprintf(buf, sizeof buf, fmt, args...);
    s += buf;
  };
  line("trace:      %s (%s on disk)\n", j["path"].get<std::string>().c_str(), human_bytes(j["file_bytes"]).c_str());
  line("model:      %s: %d layers, %d heads, %d KV heads, head_dim %d, rope_theta %g, %s\n", m.model.name.c_str(),
       m.model.layers, m.model.heads, m.model.kv_heads, m.model.head_dim, m.model.rope_theta, m.model.dtype.c_str());
  line("stored:     layers %s; KV heads %s; query heads %s\n", list_text(m.layers, m.model.layers).c_str(),
       list_text(m.kv_heads, m.model.kv_heads).c_str(), list_text(m.query_heads, m.model.heads).c_str());
  line("data:       %s keys %s, values %s, queries %s\n", std::string(to_string(t.storage_dtype())).c_str(),
       human_bytes(j["tensor_bytes"]["keys"]).c_str(),
       t.has_values() ? human_bytes(j["tensor_bytes"]["values"]).c_str() : "absent",
       human_bytes(j["tensor_bytes"]["queries"]).c_str());
  const int64_t T = t.tokens_count();
  line("tokens:     %lld (prompt %lld + %lld generated), %zu sentences (mean %.1f tokens)\n", (long long)T,
       (long long)m.prompt_tokens, (long long)(T - m.prompt_tokens), m.sentence_starts.size(),
       double(T) / double(m.sentence_starts.size()));
  line("queries:    %lld (%lld decode steps, %lld in the prompt window)\n", (long long)t.steps_count(),
       (long long)j["decode_queries"].get<int64_t>(), (long long)(t.steps_count() - j["decode_queries"].get<int64_t>()));
  line("statistics: surprisal %s, entropy/varentropy %s\n", t.tokens().surprisal.empty() ? "absent" : "yes",
       t.tokens().entropy.empty() ? "absent" : "yes");
  line("source:     %s%s%s%s%s\n", m.source.kind.empty() ? "(unknown)" : m.source.kind.c_str(),
       m.source.model.empty() ? "" : (", model " + m.source.model).c_str(),
       m.source.text.empty() ? "" : (", text " + m.source.text).c_str(),
       m.source.seed >= 0 ? (", seed " + std::to_string(m.source.seed)).c_str() : "",
       m.source.command.empty() ? "" : ("\n            " + m.source.command).c_str());
  if (!j.contains("profile")) return s;
  const auto& p = j["profile"];
  line("profile:    %d layers x %d query heads x %d %s queries (sampled)\n", p["layers_sampled"].get<int>(),
       p["heads_sampled"].get<int>(), p["queries_sampled"].get<int>(),
       p["decode_queries"].get<bool>() ? "decode" : "prompt");
  line("  sink share (first %d tokens)      %.3f   (uniform attention: %.4f)\n", po.sink_tokens,
       p["sink_share"].get<double>(), p["sink_share_uniform"].get<double>());
  line("  recent share (last %d tokens)     %.3f\n", po.recent_tokens, p["recent_share"].get<double>());
  line("  attention entropy                 %.3f nats (%.2f of uniform)\n", p["attention_entropy_nats"].get<double>(),
       p["attention_entropy_ratio"].get<double>());
  line("  tokens holding 90%% of the mass    %.2f%% of the context\n", 100 * p["mass90_fraction"].get<double>());
  if (!p["query_cosine"].empty()) {
    s += "  query cosine by distance         ";
    for (const auto& c : p["query_cosine"]) line(" %d: %.3f", c["distance"].get<int>(), c["cosine"].get<double>());
    s += "\n";
  }
  return s;
}

int run_info(TraceCommands& c) {
  auto trace = TraceFile::open(c.path);
  if (c.verify) trace->check_finite_all();
  ProfileOptions po;
  po.max_layers = c.profile_layers;
  po.max_queries = c.profile_queries;
  TraceProfile prof;
  if (!c.no_profile) prof = profile_trace(*trace, po);
  const nlohmann::json j = info_json(c.path, *trace, c.no_profile ? nullptr : &prof);
  if (c.format == "json") std::printf("%s\n", j.dump(2).c_str());
  else std::fputs(info_table(j, *trace, po).c_str(), stdout);
  return 0;
}

void write_with_progress(const std::string& out, const TraceSource& src, DType dtype) {
  Progress bar("writing " + out);
  write_trace(out, src, dtype, [&](double f) { bar.update(f); });
  bar.finish();
  std::fprintf(stderr, "kvsim: wrote %s (%s)\n", out.c_str(), human_bytes(bytes_on_disk(out)).c_str());
}

int run_gen(TraceCommands& c, const std::string& cmdline) {
  if (c.preset.empty() == c.config.empty())
    throw_input_error("command line", 0, "--preset/--config", "give exactly one: a preset name or a config file");
  std::vector<std::pair<std::string, std::string>> overrides;
  for (const std::string& s : c.sets) {
    const size_t eq = s.find('=');
    if (eq == std::string::npos || eq == 0)
      throw_input_error("command line", 0, "--set", "value '" + s + "' is not KEY=VALUE (e.g. --set seed=7)");
    overrides.emplace_back(s.substr(0, eq), s.substr(eq + 1));
  }
  // A preset is a name in scenarios/traces/; --config is a path (a name works there too).
  SyntheticConfig cfg = load_synthetic_config(c.preset.empty() ? c.config : c.preset, overrides, c.tokens);
  cfg.command = cmdline;
  const SyntheticTrace trace(cfg);
  write_with_progress(c.out, trace, parse_out_dtype(c.dtype, trace.storage_dtype()));
  // Each needle's token span, for `kvsim replay --needle-tokens` (a synthetic trace has no tokenizer text).
  for (size_t i = 0; i < trace.needle_spans().size(); ++i)
    std::fprintf(stderr, "kvsim: needle %zu: tokens %lld:%lld\n", i, (long long)trace.needle_spans()[i].first,
                 (long long)trace.needle_spans()[i].second);
  return 0;
}

std::string read_text_file(const std::string& path, const std::string& field) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw_input_error(path, 0, field, "cannot read the file");
  std::stringstream ss;
  ss << in.rdbuf();
  if (ss.str().empty()) throw_input_error(path, 0, field, "the file is empty; give a text to prefill");
  return ss.str();
}

// The haystack with the needle inserted at fraction `depth` of it, at the nearest sentence end at or
// after that point (so the needle is a sentence of its own), and the question appended at the end.
std::string build_prompt(const TraceCommands& c, std::string text) {
  if (!c.needle.empty()) {
    size_t at = size_t(c.depth * double(text.size()));
    const size_t end = text.find_first_of(".!?\n", at);
    at = end == std::string::npos ? text.size() : end + 1;
    text.insert(at, " " + c.needle + " ");
  }
  if (!c.question.empty()) text += "\n\n" + c.question;
  // SmolLM2-Instruct and most instruction-tuned llama-family GGUFs use ChatML.
  if (c.chat) text = "<|im_start|>user\n" + text + "<|im_end|>\n<|im_start|>assistant\n";
  return text;
}

int run_capture(TraceCommands& c, const std::string& cmdline) {
  // Options first: a bad value is reported whether or not the model is present.
  if (c.depth < 0 || c.depth > 1)
    throw_input_error("command line", 0, "--depth", "value " + std::to_string(c.depth) + " is outside 0 .. 1");
  std::string model_path = c.model;
  if (model_path.empty()) {
    model_path = llm::default_model_path();
    if (model_path.empty())
      throw_input_error("command line", 0, "--model",
                        "no model given and the default (" + std::string(llm::kDefaultModelFile) + ") is not in " +
                            llm::model_dir() + "; run tools/fetch-model.sh or pass --model FILE.gguf");
  }
  if (c.text.empty()) c.text = "/usr/share/common-licenses/GPL-3";
  std::string haystack = read_text_file(c.text, "--text");

  std::fprintf(stderr, "kvsim: loading %s\n", model_path.c_str());
  const llm::LlamaModel model(model_path);
  const llm::Tokenizer& tok = model.tokenizer();
  // Truncate the text itself (its beginning is kept) so the needle, question and template always fit.
  if (c.max_prompt_tokens > 0) {
    const int64_t frame = int64_t(tok.encode(build_prompt(c, ""), c.chat).size()) + (tok.add_bos() ? 1 : 0);
    const int64_t room = c.max_prompt_tokens - frame;
    if (room < 1)
      throw_input_error("command line", 0, "--max-prompt-tokens",
                        "value " + std::to_string(c.max_prompt_tokens) + " leaves no room for the text: the needle, "
                        "question and template alone take " + std::to_string(frame) + " tokens");
    std::vector<int32_t> ids = tok.encode(haystack, false);
    if (int64_t(ids.size()) > room) {
      ids.resize(size_t(room));
      haystack = tok.decode(ids, false);
    }
  }
  std::vector<int32_t> prompt;
  if (tok.add_bos()) prompt.push_back(tok.bos());
  const std::vector<int32_t> body = tok.encode(build_prompt(c, haystack), /*parse_special=*/c.chat);
  prompt.insert(prompt.end(), body.begin(), body.end());

  llm::CaptureOptions o;
  if (!c.layers.empty()) o.layers = parse_index_list(c.layers, "--layers");
  if (!c.kv_heads.empty()) o.kv_heads = parse_index_list(c.kv_heads, "--kv-heads");
  o.obs_window = c.obs_window;
  o.stop_at_eos = !c.ignore_eos;
  o.threads = c.threads;
  o.dtype = parse_out_dtype(c.dtype, DType::fp32);
  o.source.kind = "gguf";
  o.source.model = model_path;
  o.source.text = c.text + (c.needle.empty() ? "" : " + needle at depth " + std::to_string(c.depth));
  o.source.command = cmdline;
  std::fprintf(stderr, "kvsim: capturing %zu prompt tokens + up to %d generated (%s, %d threads)\n", prompt.size(),
               c.gen_tokens, model.config().name.c_str(), c.threads);
  const MemoryTrace trace = llm::capture_trace(model, prompt, c.gen_tokens, o);
  const auto& ids = trace.tokens().token_ids;
  const std::vector<int32_t> generated(ids.begin() + trace.meta().prompt_tokens, ids.end());
  std::fprintf(stderr, "kvsim: generated: %s\n", tok.decode(generated, false).c_str());
  write_with_progress(c.out, trace, o.dtype);
  return 0;
}

int run_slice(TraceCommands& c, const std::string& cmdline) {
  auto trace = TraceFile::open(c.path);
  SliceSpec spec;
  if (!c.layers.empty()) spec.layers = parse_index_list(c.layers, "--layers");
  if (!c.kv_heads.empty()) spec.kv_heads = parse_index_list(c.kv_heads, "--kv-heads");
  if (!c.steps.empty()) parse_step_range(c.steps, spec, "--steps");
  spec.truncate_tokens = !c.keep_tokens;
  spec.command = cmdline;
  const SlicedTrace slice(*trace, spec, c.path);
  write_with_progress(c.out, slice, parse_out_dtype(c.dtype, trace->storage_dtype()));
  return 0;
}

// --needle TEXT (found with the model's tokenizer) or --needle-tokens FIRST:END in the longest trace;
// {0, 0} without either.
std::pair<int64_t, int64_t> fit_needle_span(const TraceCommands& c, const std::vector<std::unique_ptr<TraceFile>>& files,
                                            const std::vector<const TraceSource*>& sources) {
  if (c.fit_needle.empty() && c.fit_needle_tokens.empty()) return {0, 0};
  if (!c.fit_needle.empty() && !c.fit_needle_tokens.empty())
    throw_input_error("command line", 0, "--needle-tokens", "give either --needle TEXT or --needle-tokens, not both");
  size_t longest = 0;
  for (size_t i = 1; i < sources.size(); ++i)
    if (sources[i]->tokens_count() > sources[longest]->tokens_count()) longest = i;
  const TraceSource& t = *sources[longest];
  if (!c.fit_needle_tokens.empty()) {
    const auto [a, b] = parse_token_span(c.fit_needle_tokens, "--needle-tokens");
    const int64_t P = t.meta().prompt_tokens;
    if (a < 0 || b <= a || b > P)  // checked before the fit spends its minute
      throw_input_error(files[longest]->path(), 0, "--needle-tokens",
                        "value '" + c.fit_needle_tokens + "' is not a span of the prompt; allowed: FIRST:END with 0 <= FIRST < END <= " +
                            std::to_string(P));
    return {a, b};
  }
  const std::string gguf = c.model.empty() ? llm::default_model_path() : c.model;
  if (std::error_code ec; !std::filesystem::exists(gguf, ec))
    throw_input_error("command line", 0, "--needle",
                      "needs the trace's model for its tokenizer: '" + gguf + "' does not exist (give --model FILE.gguf)");
  const llm::Tokenizer tok{llm::GgufFile(gguf)};
  const auto span = llm::find_text_tokens(tok, t.tokens().token_ids, c.fit_needle, 0, t.meta().prompt_tokens);
  if (!span)
    throw_input_error(files[longest]->path(), 0, "--needle", "text '" + c.fit_needle + "' does not occur in the trace's prompt");
  return *span;
}

int run_fit(TraceCommands& c) {
  std::vector<std::unique_ptr<TraceFile>> files;
  std::vector<const TraceSource*> sources;
  for (const std::string& p : c.fit_paths) {
    files.push_back(TraceFile::open(p));
    files.back()->check_finite_all();  // NaN or Inf anywhere: an error naming the tensor, before any fitting
    sources.push_back(files.back().get());
  }
  FitOptions o;
  o.groups = c.fit_groups;
  o.seed = c.fit_seed;
  o.needle = fit_needle_span(c, files, sources);
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<TraceFitResult> fits = fit_traces(sources, c.fit_paths, o);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  write_file_atomic(c.out, fit_yaml(fits, o));
  if (c.format == "json") std::printf("%s\n", fit_json(fits, o).c_str());
  else std::fputs(fit_table(fits).c_str(), stdout);
  std::fprintf(stderr, "kvsim: fitted in %.1f s; wrote %s\n", secs, c.out.c_str());
  return 0;
}

}  // namespace

TraceCommands* add_trace_commands(CLI::App& app) {
  static TraceCommands c;
  auto* trace = app.add_subcommand("trace", "inspect, generate and slice attention traces (docs/trace-format.md)");
  trace->require_subcommand(1);
  c.info = trace->add_subcommand("info", "model, lengths, stored layers/heads, size and a structural profile");
  c.info->add_option("trace", c.path, "trace file or shard directory")->required();
  c.info->add_option("--format", c.format, "output format")->check(CLI::IsMember({"table", "json"}));
  c.info->add_flag("--verify", c.verify, "scan every tensor for NaN/Inf (reads the whole trace)");
  c.info->add_flag("--no-profile", c.no_profile, "skip the structural profile (reads only the header)");
  c.info->add_option("--profile-layers", c.profile_layers, "layers sampled by the profile (0 = all)")
      ->check(CLI::Range(0, 100000));
  c.info->add_option("--profile-queries", c.profile_queries, "queries per head sampled by the profile (0 = all)")
      ->check(CLI::Range(0, 100000000));

  c.gen = trace->add_subcommand("gen", "write a synthetic trace (docs/synthetic-traces.md)");
  c.gen->add_option("--preset", c.preset, "preset name from scenarios/traces/ (e.g. needle, multidoc-qa)");
  c.gen->add_option("--config", c.config, "generator config YAML");
  c.gen->add_option("--set", c.sets, "KEY=VALUE override of a generator knob (repeatable)");
  c.gen->add_option("--tokens", c.tokens,
                    "total length T: prompt_tokens = T - generated_tokens, then the config's scaling rules at T")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 32));
  c.gen->add_option("--dtype", c.dtype, "element type written: fp32, fp16 or bf16 (default: the config's)");
  c.gen->add_option("-o,--out", c.out, "output .safetensors (written atomically)")->required();

  c.slice = trace->add_subcommand("slice", "write a subset of a trace's layers, KV heads and query rows");
  c.slice->add_option("trace", c.path, "trace file or shard directory")->required();
  c.slice->add_option("--layers", c.layers, "model layers to keep, e.g. 0,4,8 or 0-3 (default: all stored)");
  c.slice->add_option("--kv-heads", c.kv_heads, "KV heads to keep, with their query heads (default: all stored)");
  c.slice->add_option("--steps", c.steps, "query rows to keep: A:B (B exclusive), A:, :B or one row A");
  c.slice->add_flag("--keep-tokens", c.keep_tokens, "keep tokens after the last kept query (default: drop them)");
  c.slice->add_option("--dtype", c.dtype, "element type written (default: the source's)");
  c.slice->add_option("-o,--out", c.out, "output .safetensors (written atomically)")->required();

  c.capture = trace->add_subcommand("capture", "run a GGUF llama-family model on a text and record its attention trace");
  c.capture->add_option("--model", c.model, "GGUF file (default: SmolLM2-135M-Instruct Q4_1 from tools/fetch-model.sh)");
  c.capture->add_option("--text", c.text, "prompt text file (default: /usr/share/common-licenses/GPL-3)");
  c.capture->add_option("--needle", c.needle, "a sentence inserted into the text (needle in a haystack)");
  c.capture->add_option("--depth", c.depth, "where the needle goes, as a fraction of the text (0 .. 1)");
  c.capture->add_option("--question", c.question, "appended after the text (e.g. a question about the needle)");
  c.capture->add_flag("--chat", c.chat, "wrap the prompt in the ChatML template (instruction-tuned models)");
  c.capture->add_option("--max-prompt-tokens", c.max_prompt_tokens, "cut the text so the whole prompt is about N tokens (0 = all)")
      ->check(CLI::Range(int64_t(0), int64_t(1) << 32));
  c.capture->add_option("--gen", c.gen_tokens, "tokens to generate greedily (stops early at end of sequence)")
      ->check(CLI::Range(0, 1000000));
  c.capture->add_flag("--ignore-eos", c.ignore_eos, "keep generating past the end-of-sequence token");
  c.capture->add_option("--layers", c.layers, "model layers to store, e.g. 0,4,8 or 0-3 (default: all)");
  c.capture->add_option("--kv-heads", c.kv_heads, "KV heads to store, with their query heads (default: all)");
  c.capture->add_option("--obs-window", c.obs_window, "prompt positions whose queries are stored (the last N)")
      ->check(CLI::Range(1, 1000000));
  c.capture->add_option("--threads", c.threads, "threads for the model's matrix products")->check(CLI::Range(1, 256));
  c.capture->add_option("--dtype", c.dtype, "element type written: fp32 (default), fp16 or bf16");
  c.capture->add_option("-o,--out", c.out, "output .safetensors (written atomically)")->required();

  c.fit = trace->add_subcommand("fit", "fit the synthetic generator's knobs to real traces (docs/synthetic-traces.md)");
  c.fit->add_option("traces", c.fit_paths, "real trace files; several lengths of one text add scaling rules")->required();
  c.fit->add_option("-o,--out", c.out, "fitted generator config YAML (written atomically)")->required();
  c.fit->add_option("--groups", c.fit_groups, "contiguous layer groups fitted separately")->check(CLI::Range(1, 4096));
  c.fit->add_option("--seed", c.fit_seed, "seed of the simulated traces and of the fitted config")
      ->check(CLI::Range(uint64_t(0), uint64_t(9007199254740992ull)));
  c.fit->add_option("--needle", c.fit_needle,
                    "text of a needle in the longest trace's prompt: the fitted config gets a needle at its depth and "
                    "length, its strength fitted to the real needle's attention share (tokenizer: --model, else the "
                    "default model)");
  c.fit->add_option("--needle-tokens", c.fit_needle_tokens, "FIRST:END, the needle as a token span instead of --needle");
  c.fit->add_option("--model", c.model, "GGUF file whose tokenizer finds --needle (default: the default model)");
  c.fit->add_option("--format", c.format, "residuals printed as")->check(CLI::IsMember({"table", "json"}));
  return &c;
}

int run_trace_command(TraceCommands& c, int argc, char** argv) {
  const std::string cmdline = command_line(argc, argv);
  if (c.info->parsed()) return run_info(c);
  if (c.gen->parsed()) return run_gen(c, cmdline);
  if (c.slice->parsed()) return run_slice(c, cmdline);
  if (c.capture->parsed()) return run_capture(c, cmdline);
  if (c.fit->parsed()) return run_fit(c);
  return -1;
}

}  // namespace kvsim
