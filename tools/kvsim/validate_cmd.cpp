#include "tools/kvsim/validate_cmd.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>

#include "kernels/cuda_device.hpp"
#include "policies/phase_traffic.hpp"
#include "policies/registry.hpp"
#include "validate/gpu_kit.hpp"
#include "validate/host_threads.hpp"
#include "validate/kernel_model_check.hpp"
#include "validate/kernel_time_check.hpp"
#include "validate/validate.hpp"
#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "model/library.hpp"
#include "core/units.hpp"
#include "tools/kvsim/host_probe.hpp"

namespace kvsim {

struct ValidateCommand {
  CLI::App* cmd = nullptr;
  std::string device = "cpu", out, report, format = "table", host, hardware, name, filter;
  bool quick = false, kit = false, kernel_models = false;
  std::string measurements, predict, model;
  bool phases = false;
  double context = 0;
  std::vector<std::string> policies;
  std::string clock = "cpu";
  std::string kernels = "optimized";
  double probe_seconds = 2.0;
  int repeats = 7;
};

ValidateCommand* add_validate_command(CLI::App& app) {
  static ValidateCommand c;
  c.cmd = app.add_subcommand("validate",
                             "time every reference kernel against the roofline model on this machine's measured "
                             "ceilings; write a calibration file (docs/validation/)");
  c.cmd->add_option("--device", c.device,
                    "where the kernels run: cpu, cuda, or emu (the CUDA kernels through the emulator: per phase the "
                    "model's bytes and launches beside the kernels' sectors, launches and host syncs; nothing timed)")
      ->check(CLI::IsMember({"cpu", "cuda", "emu"}));
  c.cmd->add_option("--out", c.out, "write the fitted calibration YAML to FILE (atomically)");
  c.cmd->add_option("--report", c.report, "also write the report in --format to FILE (the table still goes to standard output)");
  c.cmd->add_option("--format", c.format, "report format")->check(CLI::IsMember({"table", "json", "csv"}));
  c.cmd->add_flag("--quick", c.quick, "one small size per kernel, one sample: a smoke test, not a measurement");
  c.cmd->add_option("--host", c.host,
                    "CPU ceilings from this host profile (name or YAML path) instead of measuring them now");
  c.cmd->add_option("--hardware", c.hardware,
                    "GPU spec for --device cuda (name or YAML path); default: the library GPU with GPU 0's SM count "
                    "and memory");
  c.cmd->add_flag("--kit", c.kit,
                  "--device cuda: the GPU kit (make gpu-validate): write scenarios/calibration/<gpu>-measured.yaml "
                  "and docs/validation/<gpu>-measured.md, compared with <gpu>-published.yaml (--out and --report "
                  "override the paths)");
  c.cmd->add_flag("--kernel-models", c.kernel_models,
                  "check the kernel models (model/kernel_model.hpp) against published kernel timings: print each "
                  "point's prediction and error; --report FILE writes the Markdown table (docs/validation/"
                  "kernel-models.md keeps its hand-written part), --out FILE the per-model errors the plan prints "
                  "(scenarios/measurements/kernel-model-checks.yaml)");
  c.cmd->add_option("--measurements", c.measurements,
                    "--kernel-models: the published timings (default: scenarios/measurements/kernel-models.yaml); "
                    "--predict: the measured calibration to compare with (default: scenarios/calibration/<gpu>-measured.yaml)");
  c.cmd->add_option("--probe-seconds", c.probe_seconds, "time per host-probe measurement")
      ->check(CLI::Range(0.05, 600.0));
  c.cmd->add_option("--repeats", c.repeats, "timed samples per point at least (median)")->check(CLI::Range(1, 1000));
  c.cmd->add_option("--clock", c.clock,
                    "CPU kernels timed by each thread's CPU clock (cpu: excludes time other processes hold the "
                    "cores) or the wall clock (wall: right on an otherwise idle machine)")
      ->check(CLI::IsMember({"cpu", "wall"}));
  c.cmd->add_option("--name", c.name, "the calibration's name (default: <host or GPU>-<device>)");
  c.cmd->add_option("--filter", c.filter, "only kernels whose phase name contains this");
  c.cmd->add_option("--policy", c.policies, "--device emu: only these policies (repeatable; default: all)");
  c.cmd->add_option("--predict", c.predict,
                    "--device emu: run the GPU kit's CUDA cases through the emulator at the kit's sizes and price each "
                    "with the kernel time model (validate/kernel_time_model.hpp) on this library GPU, beside the kit's "
                    "measurement where scenarios/calibration/<gpu>-measured.yaml has one (--filter picks cases; "
                    "--report FILE writes the Markdown or, with --format json, the JSON)");
  c.cmd->add_flag("--phases", c.phases,
                  "--device emu --predict GPU: price every policy's linked phases (the kernels `validate --device "
                  "emu` runs) on GPU instead of the kit's cases, at --model's heads and --context");
  c.cmd->add_option("--model", c.model,
                    "--device emu: the phases' shape from this library model's query heads, KV heads and head size "
                    "(one fp32 layer, one sequence; default 8 / 2 heads of 128)");
  c.cmd->add_option("--context", c.context, "--device emu: the phases' context in tokens (default 16384)")
      ->check(CLI::Range(1.0, 16777216.0));
  c.cmd->add_option("--kernels", c.kernels,
                    "--device cpu: optimized (default: kernels/host where one exists, else the reference) or "
                    "reference (kvsim::ref throughout: the plain kernels' profile)")
      ->check(CLI::IsMember({"optimized", "reference"}));
  return &c;
}

namespace {

// --device emu: traffic, not time — the emulator counts what each phase's kernels move
// (policies/phase_traffic.hpp).
// --device emu [--predict GPU --phases]: traffic, and with --phases the time model's price of each phase.
int run_emu_traffic(const ValidateCommand& c) {
  if (c.format == "csv")
    throw_input_error("command line", 0, "--format", "csv is not available with --device emu; use table or json");
  if (c.phases && !c.hardware.empty())
    throw_input_error("command line", 0, "--hardware", "give the GPU once: --phases prices on --predict's GPU");
  const std::string gpu_name = c.phases ? c.predict : c.hardware.empty() ? "h100-sxm" : c.hardware;
  const GpuSpec gpu =
      load_gpu_file(resolve(LibraryKind::hardware, gpu_name, "command line", 0, c.phases ? "--predict" : "--hardware"));
  std::optional<validate::TimeModelGpu> time;
  if (c.phases) time = validate::load_time_model_gpu(gpu, library_dir() + "/measurements/gpu-microarchitecture.yaml");
  const HostSpec host = load_host_file(resolve(LibraryKind::host, c.host.empty() ? gpu.default_host : c.host,
                                               "command line", 0, "--host"));
  for (const std::string& name : c.policies)
    if (!find_policy(name)) {
      std::string known;
      for (const std::string& n : policy_names()) known += (known.empty() ? "" : ", ") + n;
      throw_input_error("command line", 0, "--policy", "unknown policy '" + name + "'; known: " + known);
    }
  TrafficShape shape;
  if (!c.model.empty()) {
    const ModelConfig m = load_model_file(resolve(LibraryKind::model, c.model, "command line", 0, "--model"));
    shape.query_heads = m.query_heads, shape.kv_heads = m.kv_heads, shape.head_dim = m.head_dim;
    shape.model = m.name;
  }
  if (c.context > 0) shape.context = c.context;
  std::fprintf(stderr, "kvsim validate: running every linked phase's CUDA kernels through the emulator...\n");
  auto rows = phase_traffic(gpu, host, shape, c.policies);
  if (time)
    for (PhaseTrafficRow& r : rows) {
      if (!r.linked) continue;
      const validate::CallTime t = validate::predict_call(r.counts, *time);
      r.predicted_s = t.seconds, r.time_bound = t.bound;
      r.bound_s = r.model_bytes / (r.device == "gpu" ? gpu.hbm_bandwidth : gpu.h2d_pinned);
    }
  const std::string priced_on = time ? gpu.name : "";
  const std::string text =
      c.format == "json" ? phase_traffic_json(rows, shape, priced_on) : phase_traffic_table(rows, shape, priced_on);
  if (!c.report.empty()) write_file_atomic(c.report, text);
  const std::string shown = c.report.empty() ? text : phase_traffic_table(rows, shape, priced_on);
  std::fwrite(shown.data(), 1, shown.size(), stdout);
  return 0;
}

// --device emu --predict GPU: the kernel time model against the kit's measurements on that GPU.
int run_emu_predict(const ValidateCommand& c, const std::string& command) {
  if (c.format == "csv")
    throw_input_error("command line", 0, "--format", "csv is not available with --predict; use table or json");
  const GpuSpec gpu = load_gpu_file(resolve(LibraryKind::hardware, c.predict, "command line", 0, "--predict"));
  const validate::TimeModelGpu model =
      validate::load_time_model_gpu(gpu, library_dir() + "/measurements/gpu-microarchitecture.yaml");
  const std::string measured_path =
      c.measurements.empty() ? library_dir() + "/calibration/" + gpu.name + "-measured.yaml" : c.measurements;
  std::optional<Calibration> measured;
  if (std::ifstream(measured_path).good()) measured = load_calibration_file(measured_path);
  else if (!c.measurements.empty())
    throw_input_error(c.measurements, 0, "--measurements", "cannot read the measured calibration");
  // Shown relative to the library (no machine's absolute path in a committed report).
  std::string shown = measured_path;
  if (shown.rfind(library_dir() + "/", 0) == 0) shown = "scenarios/" + shown.substr(library_dir().size() + 1);
  std::vector<validate::Case> cases;
  for (validate::Case& k : validate::emulated_cuda_cases())
    if (c.filter.empty() || k.phase.find(c.filter) != std::string::npos) cases.push_back(std::move(k));
  if (cases.empty()) throw_input_error("command line", 0, "--filter", "'" + c.filter + "' matches no CUDA case");
  std::fprintf(stderr, "kvsim validate: %zu CUDA cases through the emulator at the kit's sizes, priced on %s...\n",
               cases.size(), gpu.name.c_str());
  validate::TimeCheck t = validate::check_kernel_times(
      cases, model, measured ? &*measured : nullptr, measured ? shown : "",
      [](const std::string& line) { std::fprintf(stderr, "kvsim validate: %s\n", line.c_str()); });
  t.command = command;
  const std::string md = "Written by `" + command + "`.\n\n" + validate::time_check_markdown(t);
  const std::string text = c.format == "json" ? validate::time_check_json(t) : md;
  if (!c.report.empty()) write_file_atomic(c.report, text);
  std::fwrite(md.data(), 1, md.size(), stdout);
  return 0;
}

// --device cuda: the library GPU the kernels run on (--hardware, or matched by SM count and memory).
GpuSpec cuda_target(const ValidateCommand& c, const cuda::DeviceInfo& device) {
  if (!c.hardware.empty())
    return load_gpu_file(resolve(LibraryKind::hardware, c.hardware, "command line", 0, "--hardware"));
  GpuSpec gpu = validate::library_gpu_of(device);
  std::fprintf(stderr, "kvsim validate: GPU 0 '%s' is %s in the library (same SM count and memory)\n",
               device.name.c_str(), gpu.name.c_str());
  return gpu;
}

}  // namespace

namespace {
// The marker after which docs/validation/kernel-models.md is written by hand (kept on a rewrite).
const char* const kKernelChecksEnd = "<!-- end of the part written by `kvsim validate --kernel-models` -->";
const char* const kKernelChecksBegin = "<!-- written by `kvsim validate --kernel-models` -->";

int run_kernel_model_check(ValidateCommand& c, const std::string& command) {
  const std::string path = c.measurements.empty() ? library_dir() + "/measurements/kernel-models.yaml" : c.measurements;
  const validate::KernelCheckReport r = validate::check_kernel_models(path);
  const std::string md = validate::kernel_check_markdown(r, command);
  std::fputs(md.c_str(), stdout);
  if (!c.report.empty()) {
    // The page keeps what stands before the begin marker (the rule, written before any comparison)
    // and after the end marker (notes by hand); the table between them is rewritten.
    std::string head, tail;
    if (std::ifstream in(c.report); in) {
      std::stringstream ss;
      ss << in.rdbuf();
      const std::string old = ss.str();
      const size_t b = old.find(kKernelChecksBegin), e = old.find(kKernelChecksEnd);
      if (b != std::string::npos) head = old.substr(0, b);
      if (e != std::string::npos) tail = old.substr(e + std::strlen(kKernelChecksEnd));
    }
    write_file_atomic(c.report, head + kKernelChecksBegin + "\n" + md + kKernelChecksEnd + tail);
  }
  if (!c.out.empty()) write_file_atomic(c.out, validate::kernel_check_yaml(r, command));
  return r.unexplained.empty() ? 0 : 1;
}
}  // namespace

int run_validate_command(ValidateCommand& c, int argc, char** argv) {
  if (!c.cmd->parsed()) return -1;
  validate::Options o;
  o.quick = c.quick;
  o.min_repeats = c.repeats;
  o.filter = c.filter;
  o.command = "kvsim";
  for (int i = 1; i < argc; ++i) o.command += std::string(" ") + argv[i];
  if (o.quick) o.min_seconds = 0, o.sample_seconds = 0;

  if (c.kernel_models) return run_kernel_model_check(c, o.command);
  if (c.phases && (c.device != "emu" || c.predict.empty()))
    throw_input_error("command line", 0, "--phases", "needs --device emu --predict GPU");
  if ((!c.model.empty() || c.context > 0) && (c.device != "emu" || (!c.predict.empty() && !c.phases)))
    throw_input_error("command line", 0, !c.model.empty() ? "--model" : "--context",
                      "sets the phases' shape: --device emu, alone or with --predict GPU --phases");
  if (c.device == "emu" && !c.predict.empty() && !c.phases) return run_emu_predict(c, o.command);
  if (!c.predict.empty() && c.device != "emu")
    throw_input_error("command line", 0, "--predict", "needs --device emu (the time model prices emulated launches)");
  if (c.device == "emu") return run_emu_traffic(c);
  validate::Ceilings ce;
  ce.device = c.device;
  std::vector<validate::Case> cases;
  validate::Timer timer;
  if (c.device == "cuda") {
    std::string why;
    const auto gpus = cuda::devices(&why);
    if (gpus.empty()) {
      std::fprintf(stderr, "kvsim: error: validate --device cuda: no CUDA device (%s)\n", why.c_str());
      return 1;
    }
    ce = validate::gpu_ceilings(cuda_target(c, gpus[0]), gpus[0].name);
    cases = validate::cuda_cases();
    timer = validate::cuda_timer();
  } else {
    ce.threads = int(std::max(1u, std::thread::hardware_concurrency()));
    if (!c.host.empty()) {
      const std::string path = resolve(LibraryKind::host, c.host, "command line", 0, "--host");
      const HostSpec h = load_host_file(path);
      ce.name = h.name;
      ce.threads = std::min(ce.threads, h.cores);
      ce.machine.dram = h.dram_bandwidth;
      ce.machine.host_compute = h.fp32;
      ce.source = "host profile " + path;
    } else {
      // Measured now, by the same timer and statistic as the kernels (see validate/ceilings.cpp).
      const validate::Timer t = validate::cpu_timer(c.clock == "wall");
      const validate::HostCeilingsMeasured h = validate::measure_host_ceilings(ce.threads, t, o);
      ce.name = host_cpu_model();
      ce.machine.dram = h.dram_bandwidth;
      ce.machine.host_compute = h.fp32;
      char b[320];
      std::snprintf(b, sizeof b,
                    "measured in this run, timed like the kernels (%s clock, median of short samples, %d threads at once): "
                    "STREAM triad %.1f GB/s, Eigen SGEMM 256^3 %.1f GFLOP/s",
                    c.clock == "wall" ? "wall" : "thread CPU", ce.threads, h.dram_bandwidth / 1e9, h.fp32 / 1e9);
      ce.source = b;
    }
    ce.unit = ComputeUnit::host;
    cases = validate::host_cases(c.kernels == "optimized");
    timer = validate::cpu_timer(c.clock == "wall");
  }
  o.calibration_name = c.name.empty() ? ce.name + "-" + (c.kit ? std::string("measured") : c.device) : c.name;
  const Calibration uncal =
      load_calibration_file(resolve(LibraryKind::calibration, "roofline", "command line", 0, "calibration"));
  if (c.kit) {
    if (c.device != "cuda") throw_input_error("command line", 0, "--kit", "the GPU kit needs --device cuda");
    const std::string out = c.out.empty() ? kind_dir(LibraryKind::calibration) + "/" + ce.name + "-measured.yaml" : c.out;
    const std::string report =
        c.report.empty() ? library_dir() + "/../docs/validation/" + ce.name + "-measured.md" : c.report;
    const std::string pub_name = ce.name + "-published";
    const auto names = library_names(LibraryKind::calibration);
    const bool has_pub = std::find(names.begin(), names.end(), pub_name) != names.end();
    const Calibration pub = has_pub ? load_calibration_file(resolve(LibraryKind::calibration, pub_name, "library", 0,
                                                                    "calibration"))
                                    : Calibration{};
    const validate::Result r =
        validate::run_kit(cases, ce, timer, o, uncal, has_pub ? &pub : nullptr, pub_name, out, report);
    const std::string shown = validate::report_table(r);
    std::fwrite(shown.data(), 1, shown.size(), stdout);
    std::fprintf(stderr, "kvsim validate: wrote %s and %s\n", out.c_str(), report.c_str());
    return 0;
  }
  const validate::Result r = validate::run(cases, ce, timer, o, uncal);
  // A host calibration also carries what host phases pay per call and per parallel region on this
  // machine (validate/host_threads.hpp), measured after the kernels.
  std::string calibration = r.calibration_yaml;
  if (ce.unit == ComputeUnit::host) {
    std::fprintf(stderr, "kvsim validate: measuring host call, parallel-region and one-core DRAM costs...\n");
    calibration += validate::host_threads_yaml(validate::measure_host_threads(timer, o));
  }
  if (!c.out.empty()) write_file_atomic(c.out, calibration);
  const std::string text = c.format == "json"  ? validate::report_json(r)
                           : c.format == "csv" ? validate::report_csv(r)
                                               : validate::report_table(r);
  // With --report the file gets --format and the terminal still gets the table.
  const std::string shown = c.report.empty() ? text : validate::report_table(r);
  if (!c.report.empty()) write_file_atomic(c.report, text);
  std::fwrite(shown.data(), 1, shown.size(), stdout);
  return 0;
}

}  // namespace kvsim
