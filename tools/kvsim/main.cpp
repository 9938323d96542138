// kvsim command line. Subcommands: plan, sweep, serve, capacity, report, trace, replay, study, reproduce, validate,
// calibrate, hardware, host, model, policy, bench, ui.
// Input errors print one line naming file, line, field, value and what is allowed, and exit 2.
#include <CLI/CLI.hpp>
#include <benchmark/benchmark.h>

#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "model/library.hpp"
#include "model/library_json.hpp"
#include "model/plan.hpp"
#include "tools/bench/bench_cuda.hpp"
#include "model/report.hpp"
#include "model/scenario.hpp"
#include "core/units.hpp"
#include "model/step_timeline.hpp"
#include "tools/kvsim/calibrate_cmd.hpp"
#include "tools/kvsim/host_probe.hpp"
#include "tools/kvsim/replay_cmd.hpp"
#include "tools/kvsim/report_cmd.hpp"
#include "tools/kvsim/study_cmd.hpp"
#include "tools/kvsim/reproduce_cmd.hpp"
#include "tools/kvsim/serve_cmd.hpp"
#include "tools/kvsim/trace_cmd.hpp"
#include "tools/kvsim/ui_cmd.hpp"
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

struct PlanOptions {
  std::string scenario, format = "table", out, timeline;
  bool detail = false;  // the table: every phase, range and note under each policy, not the glance
  Overrides o;
  std::string hardware, host, model, calibration, context, output, batch;
  std::string tensor_parallel, weight_dtype, kv_dtype;
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
  if (!p.tensor_parallel.empty()) p.o.tensor_parallel = p.tensor_parallel;
  if (!p.weight_dtype.empty()) p.o.weight_dtype = p.weight_dtype;
  if (!p.kv_dtype.empty()) p.o.kv_dtype = p.kv_dtype;
  const Scenario s = load_scenario_file(p.scenario, policy_catalog(), p.o);
  if (target_requested(*p.target)) return run_target_plan(*p.target, s, p.format, p.out);
  const Deployment d = make_deployment(s);
  const std::vector<PlanResult> results = plan_scenario(s, d, *find_policy("full"));
  if (!p.timeline.empty()) {
    std::vector<TimelineStep> steps;
    for (const PlanResult& r : results) steps.push_back({&r, std::string(r.policy->name()) + " decode step"});
    write_file_atomic(p.timeline, decode_timeline_json(d, steps).dump() + "\n");
  }
  if (p.format == "json") emit(plan_json(s, results).dump(2) + "\n", p.out);
  else if (p.format == "csv") emit(plan_csv(s, results), p.out);
  else emit(plan_table(s, results, p.detail), p.out);
  return 0;
}

void list_kind(LibraryKind k) {
  for (const auto& n : library_names(k)) std::printf("%s\n", n.c_str());
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
  kvsim::bench::register_cuda_benchmarks();
  benchmark::Initialize(&argc, argv.data());
  if (benchmark::ReportUnrecognizedArguments(argc, argv.data())) return 2;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

// The `plan` subcommand's options, bound to `plan`.
CLI::App* add_plan_command(CLI::App& app, PlanOptions& plan) {
  auto* cmd_plan = app.add_subcommand("plan", "memory, max batch, TTFT, TPOT and throughput per policy");
  cmd_plan->add_option("scenario", plan.scenario, "scenario YAML (default: scenarios/default.yaml)");
  cmd_plan->add_option("--format", plan.format, "output format")->check(CLI::IsMember({"table", "json", "csv"}));
  cmd_plan->add_option("-o,--out", plan.out, "write to FILE (atomically) instead of standard output");
  cmd_plan->add_flag("--detail", plan.detail,
                     "table format: under each policy its 80% range and evidence, the decode step's phases, the roofline "
                     "bound, the phases extrapolated, unmeasured or kernel-modeled, and its notes (default: one line each)");
  cmd_plan->add_option("--timeline", plan.timeline,
                       "write the decode step of each result as a Chrome trace-event JSON (open in Perfetto)");
  cmd_plan->add_option("--hardware", plan.hardware, "GPU: a name from `kvsim hardware list` or a YAML path");
  cmd_plan->add_option("--host", plan.host, "host: a name from `kvsim host list` or a YAML path");
  cmd_plan->add_option("--model", plan.model, "model: a name from `kvsim model list` or a YAML path");
  cmd_plan->add_option("--calibration", plan.calibration, "calibration file (efficiencies); default: roofline");
  cmd_plan->add_option("--context", plan.context, "context tokens: N or N1,N2,...");
  cmd_plan->add_option("--output", plan.output, "output tokens per request");
  cmd_plan->add_option("--tensor-parallel", plan.tensor_parallel, "tensor-parallel degree (workload.tensor_parallel)");
  cmd_plan->add_option("--weight-dtype", plan.weight_dtype, "weight dtype: fp32, fp16, bf16, fp8 (workload.weight_dtype)");
  cmd_plan->add_option("--kv-dtype", plan.kv_dtype, "KV-cache dtype: fp32, fp16, bf16, fp8 (workload.kv_dtype)");
  cmd_plan->add_option("--batch", plan.batch, "batch size, or max");
  cmd_plan->add_option("--policy", plan.o.policies, "policy name (repeatable; replaces the scenario's list)");
  cmd_plan->add_option("--set", plan.o.sets, "POLICY.PARAM=VALUE (repeatable)");
  plan.target = add_target_options(*cmd_plan);
  return cmd_plan;
}

// The library subcommands (hardware, host, model, policy: list or show) and host probe, with what they parse into.
struct LibraryCommands {
  std::string name, fmt = "table";
  CLI::App *hw = nullptr, *host = nullptr, *model = nullptr, *policy = nullptr, *probe = nullptr;
  std::string probe_name = "this-host";
  double probe_seconds = 2.0;
};

// Registers the library subcommands, in the order their help lists them, bound to `lc`.
void add_library_commands(CLI::App& app, LibraryCommands& lc) {
  auto add_library_cmd = [&](const char* cmd, const char* what) {
    auto* c = app.add_subcommand(cmd, std::string("list or show ") + what + " in the library");
    c->require_subcommand(1);
    c->add_subcommand("list", std::string("list ") + what);
    auto* show = c->add_subcommand("show", std::string("show one ") + what);
    show->add_option("name", lc.name, "name or path")->required();
    show->add_option("--format", lc.fmt, "output format")->check(CLI::IsMember({"table", "json"}));
    return c;
  };
  lc.hw = add_library_cmd("hardware", "GPUs");
  lc.host = add_library_cmd("host", "hosts");
  lc.model = add_library_cmd("model", "models");
  lc.policy = add_library_cmd("policy", "policies");
  lc.probe = lc.host->add_subcommand("probe",
                                     "measure this machine's DRAM bandwidth and fp32 FLOP/s; print a host YAML");
  lc.probe->add_option("--name", lc.probe_name, "name field of the profile");
  lc.probe->add_option("--seconds", lc.probe_seconds, "time per measurement")->check(CLI::Range(0.1, 600.0));
}

// Runs the library subcommand that was parsed (hardware, host, model: list or show; policy: list or show);
// -1 when none was.
int run_library_command(const LibraryCommands& lc) {
  const std::string& name = lc.name;
  const std::string& fmt = lc.fmt;
  CLI::App* const cmd_hw = lc.hw;
  CLI::App* const cmd_host = lc.host;
  CLI::App* const cmd_model = lc.model;
  CLI::App* const cmd_policy = lc.policy;
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
    const nlohmann::json j = policy_json(*p);
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
  return -1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kvsim: cost model and simulator for long-context LLM decoding under KV-cache selection policies"};
  app.set_version_flag("--version", std::string("kvsim ") + KVSIM_VERSION);
  app.require_subcommand(1);
  bool full_step_sim = false;
  app.add_flag("--full-step-sim", full_step_sim,
               "simulate every layer of each decode step instead of copying the schedule's period (the oracle; "
               "same as KVSIM_FULL_STEP_SIM=1; sim/README.md)");

  PlanOptions plan;
  CLI::App* cmd_plan = add_plan_command(app, plan);
  SweepCommand* sweep_cmd = add_sweep_command(app);

  TraceCommands* trace_cmds = add_trace_commands(app);
  ReplayCommand* replay_cmd = add_replay_command(app);
  StudyCommand* study_cmd = add_study_command(app);
  ReproduceCommand* reproduce_cmd = add_reproduce_command(app);
  ValidateCommand* validate_cmd = add_validate_command(app);
  CalibrateCommand* calibrate_cmd = add_calibrate_command(app);
  ServeCommands* serve_cmds = add_serve_commands(app);
  UiCommand* ui_cmd = add_ui_command(app);
  ReportCommand* report_cmd = add_report_command(app);

  LibraryCommands lib;
  add_library_commands(app, lib);

  auto* cmd_bench = app.add_subcommand("bench", "run kvsim's Google Benchmarks (pass --benchmark_* options)");
  cmd_bench->allow_extras();
  cmd_bench->prefix_command();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }

  if (full_step_sim) set_full_step_simulation(true);
  try {
    if (cmd_plan->parsed()) return run_plan(plan);
    if (const int rc = run_sweep_command(*sweep_cmd); rc >= 0) return rc;
    if (const int rc = run_trace_command(*trace_cmds, argc, argv); rc >= 0) return rc;
    if (const int rc = run_replay_command(*replay_cmd); rc >= 0) return rc;
    if (const int rc = run_study_command(*study_cmd); rc >= 0) return rc;
    if (const int rc = run_reproduce_command(*reproduce_cmd); rc >= 0) return rc;
    if (const int rc = run_validate_command(*validate_cmd, argc, argv); rc >= 0) return rc;
    if (const int rc = run_calibrate_command(*calibrate_cmd, argc, argv); rc >= 0) return rc;
    if (const int rc = run_serve_commands(*serve_cmds); rc >= 0) return rc;
    if (const int rc = run_ui_command(*ui_cmd); rc >= 0) return rc;
    if (const int rc = run_report_command(*report_cmd); rc >= 0) return rc;
    if (cmd_bench->parsed()) return run_bench(cmd_bench->remaining());
    if (lib.probe->parsed()) {
      std::printf("%s", probe_host_yaml(lib.probe_name, lib.probe_seconds).c_str());
      return 0;
    }
    if (const int rc = run_library_command(lib); rc >= 0) return rc;
  } catch (const InputError& e) {
    std::fprintf(stderr, "kvsim: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kvsim: internal error: %s (please report this with the command you ran)\n", e.what());
    return 3;
  }
  return 0;
}
