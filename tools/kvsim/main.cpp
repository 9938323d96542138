// kvsim command line. Subcommands: plan, sweep, trace, replay, study, reproduce, validate, hardware, host, model, policy,
// bench.
// Input errors print one line naming file, line, field, value and what is allowed, and exit 2.
#include <CLI/CLI.hpp>
#include <benchmark/benchmark.h>

#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "model/library.hpp"
#include "model/plan.hpp"
#include "model/report.hpp"
#include "model/scenario.hpp"
#include "core/units.hpp"
#include "model/decode_graph.hpp"
#include "model/resources.hpp"
#include "sim/timeline.hpp"
#include "tools/kvsim/host_probe.hpp"
#include "tools/kvsim/replay_cmd.hpp"
#include "tools/kvsim/study_cmd.hpp"
#include "tools/kvsim/reproduce_cmd.hpp"
#include "tools/kvsim/trace_cmd.hpp"
#include "tools/kvsim/sweep_cmd.hpp"
#include "tools/kvsim/target_plan_cmd.hpp"
#include "tools/kvsim/validate_cmd.hpp"
#include "policies/registry.hpp"

#ifndef KVSIM_VERSION
#define KVSIM_VERSION "0.1.0"
#endif

using namespace kvsim;

namespace {

void emit(const std::string& text, const std::string& out_path) {
  if (out_path.empty()) {
    std::fwrite(text.data(), 1, text.size(), stdout);
  } else {
    write_file_atomic(out_path, text);
  }
}

nlohmann::json timeline_json(const Deployment& d, const std::vector<PlanResult>& results);

struct PlanOptions {
  std::string scenario, format = "table", out, timeline;
  Overrides o;
  std::string hardware, host, model, calibration, context, output, batch;
  TargetOptions* target = nullptr;  // --target-tpot / --target-throughput (tools/kvsim/target_plan_cmd.cpp)
};

int run_plan(PlanOptions& p) {
  if (p.scenario.empty()) p.scenario = library_dir() + "/default.yaml";
  if (!p.hardware.empty()) p.o.hardware = p.hardware;
  if (!p.host.empty()) p.o.host = p.host;
  if (!p.model.empty()) p.o.model = p.model;
  if (!p.calibration.empty()) p.o.calibration = p.calibration;
  if (!p.context.empty()) p.o.context = p.context.find(',') != std::string::npos ? "[" + p.context + "]" : p.context;
  if (!p.output.empty()) p.o.output = p.output;
  if (!p.batch.empty()) p.o.batch = p.batch;
  const Scenario s = load_scenario_file(p.scenario, policy_catalog(), p.o);
  if (target_requested(*p.target)) return run_target_plan(*p.target, s, p.format, p.out);
  const Workload& w = s.workload;
  const Deployment d = make_deployment(s);
  std::vector<PlanResult> results, reference;
  const Policy* full = find_policy("full");
  const ParamValues no_params;
  for (int64_t ctx : w.context_tokens) {
    for (const PolicyChoice& c : s.policies) {
      DesignPoint dp{&d, c.policy, &c.params, ctx, w.output_tokens, w.batch};
      results.push_back(evaluate(dp));
    }
    // Full KV at the same context and batch setting: the reference for speedup and memory columns.
    DesignPoint ref{&d, full, &no_params, ctx, w.output_tokens, w.batch};
    reference.push_back(evaluate(ref));
  }
  compare_to_full(results, reference);
  if (!p.timeline.empty()) write_file_atomic(p.timeline, timeline_json(d, results).dump() + "\n");
  if (p.format == "json") emit(plan_json(s, results).dump(2) + "\n", p.out);
  else if (p.format == "csv") emit(plan_csv(s, results), p.out);
  else emit(plan_table(s, results), p.out);
  return 0;
}

// The mean decode step of every feasible result as the simulator lays it out: one node per phase and
// layer, on its stream, with its dependencies (sim/decode_graph.hpp).
nlohmann::json timeline_json(const Deployment& d, const std::vector<PlanResult>& results) {
  nlohmann::json events = nlohmann::json::array();
  const auto cap = sim::capacities(d.machine);
  int pid = 0;
  for (const PlanResult& r : results) {
    ++pid;
    if (!r.feasible) continue;
    PhaseList pol, dense;
    decode_phase_lists(d, *r.policy, r.params,
                       StepShape{double(r.batch), double(r.context_tokens), double(r.output_tokens) / 2.0}, pol, dense);
    const sim::DecodeGraph g = sim::build_decode_graph(pol, dense, d.model->layers, d.machine);
    const std::string label = std::string(r.policy->name()) + " decode step, context " +
                              std::to_string(r.context_tokens) + ", batch " + std::to_string(r.batch);
    sim::append_timeline(events, pid, label, g.graph, g.graph.run(cap, sim::couplings(d.machine)), cap,
                         sim::resource_names());
  }
  return {{"traceEvents", events}, {"displayTimeUnit", "ms"}};
}

void list_kind(LibraryKind k) {
  for (const auto& n : library_names(k)) std::printf("%s\n", n.c_str());
}

nlohmann::json gpu_json(const GpuSpec& g) {
  return {{"name", g.name},
          {"description", g.description},
          {"architecture", g.architecture},
          {"default_host", g.default_host},
          {"hbm_capacity_bytes", g.hbm_capacity_bytes},
          {"hbm_bandwidth_bytes_s", g.hbm_bandwidth},
          {"tensor_fp16_flops", g.tensor_fp16},
          {"tensor_bf16_flops", g.tensor_bf16},
          {"tensor_fp8_flops", g.tensor_fp8},
          {"fp32_flops", g.fp32},
          {"sm_count", g.sm_count},
          {"l2_bytes", g.l2_bytes},
          {"pcie_generation", g.pcie_generation},
          {"pcie_lanes", g.pcie_lanes},
          {"h2d_pinned_bytes_s", g.h2d_pinned},
          {"d2h_pinned_bytes_s", g.d2h_pinned},
          {"nvlink_bytes_s", g.nvlink_bandwidth},
          {"kernel_latency_s", g.kernel_latency},
          {"host_launch_latency_s", g.host_launch_latency},
          {"ridge_bf16_flop_per_byte", g.tensor_bf16 > 0 ? g.tensor_bf16 / g.hbm_bandwidth : g.tensor_fp16 / g.hbm_bandwidth}};
}

nlohmann::json host_json(const HostSpec& h) {
  return {{"name", h.name},           {"description", h.description},   {"sockets", h.sockets},
          {"cores", h.cores},         {"dram_capacity_bytes", h.dram_capacity_bytes},
          {"dram_bandwidth_bytes_s", h.dram_bandwidth}, {"fp32_flops", h.fp32}, {"bf16_flops", h.bf16},
          {"pcie_generation", h.pcie_generation}, {"pcie_lanes", h.pcie_lanes}};
}

nlohmann::json model_json(const ModelConfig& m) {
  return {{"name", m.name},
          {"description", m.description},
          {"family", m.family},
          {"layers", m.layers},
          {"hidden", m.hidden},
          {"query_heads", m.query_heads},
          {"kv_heads", m.kv_heads},
          {"head_dim", m.head_dim},
          {"ffn_hidden", m.ffn_hidden},
          {"vocab", m.vocab},
          {"tied_embeddings", m.tied_embeddings},
          {"qkv_bias", m.qkv_bias},
          {"rope_theta", m.rope_theta},
          {"max_context", m.max_context},
          {"dtype", std::string(to_string(m.dtype))},
          {"params", m.total_params()},
          {"kv_bytes_per_token", m.kv_bytes_per_token(bytes_of(m.dtype))}};
}

// Prints a flat JSON object (SI units, as --format json gives it) as aligned lines for people, in
// the units the library files use: bytes as GiB, rates as GB/s, FLOP/s as TFLOP/s, seconds as us.
void print_kv(const nlohmann::json& j) {
  auto ends_with = [](const std::string& s, const std::string& suffix) {
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& k = it.key();
    std::string v = it->is_string() ? it->get<std::string>() : it->dump();
    if (it->is_number()) {
      const double x = it->get<double>();
      char buf[64];
      if (ends_with(k, "_bytes_s")) std::snprintf(buf, sizeof buf, "%.1f GB/s", x / kGB);
      else if (ends_with(k, "_flops") && x >= kTFLOP) std::snprintf(buf, sizeof buf, "%.1f TFLOP/s", x / kTFLOP);
      else if (ends_with(k, "_flops")) std::snprintf(buf, sizeof buf, "%.1f GFLOP/s", x / kGFLOP);
      else if (k == "kv_bytes_per_token") std::snprintf(buf, sizeof buf, "%.0f B (%.1f KiB)", x, x / 1024);
      else if (ends_with(k, "_bytes") && x >= kGiB) std::snprintf(buf, sizeof buf, "%.2f GiB", x / kGiB);
      else if (ends_with(k, "_bytes")) std::snprintf(buf, sizeof buf, "%.1f MiB", x / (1024.0 * 1024.0));
      else if (ends_with(k, "_s")) std::snprintf(buf, sizeof buf, "%.2f us", x / kUs);
      else if (k == "params") std::snprintf(buf, sizeof buf, "%.3f B", x / 1e9);
      else std::snprintf(buf, sizeof buf, "%.10g", x);
      v = buf;
    }
    std::printf("%-26s %s\n", k.c_str(), v.c_str());
  }
}

int run_bench(std::vector<std::string> args) {
  std::vector<char*> argv;
  std::string prog = "kvsim bench";
  argv.push_back(prog.data());
  for (auto& a : args) argv.push_back(a.data());
  int argc = int(argv.size());
  benchmark::Initialize(&argc, argv.data());
  if (benchmark::ReportUnrecognizedArguments(argc, argv.data())) return 2;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kvsim: cost model and simulator for long-context LLM decoding under KV-cache selection policies"};
  app.set_version_flag("--version", std::string("kvsim ") + KVSIM_VERSION);
  app.require_subcommand(1);

  PlanOptions plan;
  auto* cmd_plan = app.add_subcommand("plan", "memory, max batch, TTFT, TPOT and throughput per policy");
  cmd_plan->add_option("scenario", plan.scenario, "scenario YAML (default: scenarios/default.yaml)");
  cmd_plan->add_option("--format", plan.format, "output format")->check(CLI::IsMember({"table", "json", "csv"}));
  cmd_plan->add_option("-o,--out", plan.out, "write to FILE (atomically) instead of standard output");
  cmd_plan->add_option("--timeline", plan.timeline,
                       "write the decode step of each result as a Chrome trace-event JSON (open in Perfetto)");
  cmd_plan->add_option("--hardware", plan.hardware, "GPU: a name from `kvsim hardware list` or a YAML path");
  cmd_plan->add_option("--host", plan.host, "host: a name from `kvsim host list` or a YAML path");
  cmd_plan->add_option("--model", plan.model, "model: a name from `kvsim model list` or a YAML path");
  cmd_plan->add_option("--calibration", plan.calibration, "calibration file (efficiencies); default: roofline");
  cmd_plan->add_option("--context", plan.context, "context tokens: N or N1,N2,...");
  cmd_plan->add_option("--output", plan.output, "output tokens per request");
  cmd_plan->add_option("--batch", plan.batch, "batch size, or max");
  cmd_plan->add_option("--policy", plan.o.policies, "policy name (repeatable; replaces the scenario's list)");
  cmd_plan->add_option("--set", plan.o.sets, "POLICY.PARAM=VALUE (repeatable)");
  plan.target = add_target_options(*cmd_plan);
  SweepCommand* sweep_cmd = add_sweep_command(app);

  TraceCommands* trace_cmds = add_trace_commands(app);
  ReplayCommand* replay_cmd = add_replay_command(app);
  StudyCommand* study_cmd = add_study_command(app);
  ReproduceCommand* reproduce_cmd = add_reproduce_command(app);
  ValidateCommand* validate_cmd = add_validate_command(app);

  std::string name, fmt = "table";
  auto add_library_cmd = [&](const char* cmd, const char* what) {
    auto* c = app.add_subcommand(cmd, std::string("list or show ") + what + " in the library");
    c->require_subcommand(1);
    c->add_subcommand("list", std::string("list ") + what);
    auto* show = c->add_subcommand("show", std::string("show one ") + what);
    show->add_option("name", name, "name or path")->required();
    show->add_option("--format", fmt, "output format")->check(CLI::IsMember({"table", "json"}));
    return c;
  };
  auto* cmd_hw = add_library_cmd("hardware", "GPUs");
  auto* cmd_host = add_library_cmd("host", "hosts");
  auto* cmd_model = add_library_cmd("model", "models");
  auto* cmd_policy = add_library_cmd("policy", "policies");
  std::string probe_name = "this-host";
  double probe_seconds = 2.0;
  auto* cmd_probe = cmd_host->add_subcommand("probe", "measure this machine's DRAM bandwidth and fp32 FLOP/s; print a host YAML");
  cmd_probe->add_option("--name", probe_name, "name field of the profile");
  cmd_probe->add_option("--seconds", probe_seconds, "time per measurement")->check(CLI::Range(0.1, 600.0));

  std::vector<std::string> bench_args;
  auto* cmd_bench = app.add_subcommand("bench", "run kvsim's Google Benchmarks (pass --benchmark_* options)");
  cmd_bench->allow_extras();
  cmd_bench->prefix_command();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }

  try {
    if (cmd_plan->parsed()) return run_plan(plan);
    if (const int rc = run_sweep_command(*sweep_cmd); rc >= 0) return rc;
    if (const int rc = run_trace_command(*trace_cmds, argc, argv); rc >= 0) return rc;
    if (const int rc = run_replay_command(*replay_cmd); rc >= 0) return rc;
    if (const int rc = run_study_command(*study_cmd); rc >= 0) return rc;
    if (const int rc = run_reproduce_command(*reproduce_cmd); rc >= 0) return rc;
    if (const int rc = run_validate_command(*validate_cmd, argc, argv); rc >= 0) return rc;
    if (cmd_bench->parsed()) return run_bench(cmd_bench->remaining());
    if (cmd_probe->parsed()) {
      std::printf("%s", probe_host_yaml(probe_name, probe_seconds).c_str());
      return 0;
    }
    struct Lib {
      CLI::App* cmd;
      LibraryKind kind;
    };
    for (Lib lib : {Lib{cmd_hw, LibraryKind::hardware}, Lib{cmd_host, LibraryKind::host},
                    Lib{cmd_model, LibraryKind::model}}) {
      if (!lib.cmd->parsed()) continue;
      if (lib.cmd->got_subcommand("list")) { list_kind(lib.kind); return 0; }
      const std::string path = resolve(lib.kind, name, "command line", 0, kind_label(lib.kind));
      nlohmann::json j = lib.kind == LibraryKind::hardware ? gpu_json(load_gpu_file(path))
                         : lib.kind == LibraryKind::host   ? host_json(load_host_file(path))
                                                           : model_json(load_model_file(path));
      j["file"] = path;
      if (fmt == "json") std::printf("%s\n", j.dump(2).c_str());
      else print_kv(j);
      return 0;
    }
    if (cmd_policy->parsed()) {
      if (cmd_policy->got_subcommand("list")) {
        for (const Policy* p : all_policies())
          std::printf("%-12s %s\n", std::string(p->name()).c_str(), std::string(p->summary()).c_str());
        return 0;
      }
      const Policy* p = find_policy(name);
      if (!p) {
        throw_input_error("command line", 0, "policy",
                          "unknown policy '" + name + "'" + suggestion(name, policy_names()) + "; available: " +
                              join(policy_names()));
      }
      nlohmann::json j = {{"name", std::string(p->name())}, {"summary", std::string(p->summary())}};
      nlohmann::json params = nlohmann::json::array();
      for (const auto& s : p->params())
        params.push_back({{"name", s.name},
                          {"default", s.choices.empty() ? nlohmann::json(s.default_value)
                                                        : nlohmann::json(param_text(s, s.default_value))},
                          {"range", s.choices.empty() ? s.range.describe() : "one of " + join(s.choices)},
                          {"integer", s.integer}, {"doc", s.doc}});
      j["params"] = params;
      if (fmt == "json") {
        std::printf("%s\n", j.dump(2).c_str());
      } else {
        std::printf("%s: %s\n", std::string(p->name()).c_str(), std::string(p->summary()).c_str());
        if (p->params().empty()) std::printf("  (no parameters)\n");
        for (const auto& s : p->params())
          std::printf("  %-20s default %-12s %-22s %s\n", s.name.c_str(), param_text(s, s.default_value).c_str(),
                      (s.choices.empty() ? "range " + s.range.describe() : "one of " + join(s.choices)).c_str(),
                      s.doc.c_str());
      }
      return 0;
    }
  } catch (const InputError& e) {
    std::fprintf(stderr, "kvsim: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kvsim: internal error: %s (please report this with the command you ran)\n", e.what());
    return 3;
  }
  return 0;
}
