// The GPU kit (`make gpu-validate`, validate/gpu_kit.hpp) under the CUDA emulator with a fake clock: every
// CUDA case runs its kernels, the calibration it writes carries curves under the model's phase names,
// and the planner's efficiency lookup finds exactly those curves. No GPU is needed, so the first real
// run needs no code change. No timing is asserted: the clock is fake.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "core/error.hpp"
#include "model/deployment.hpp"
#include "model/library.hpp"
#include "policies/registry.hpp"
#include "validate/gpu_kit.hpp"

using namespace kvsim;

namespace {
GpuSpec library_gpu(const std::string& name) {
  return load_gpu_file(resolve(LibraryKind::hardware, name, "test", 0, "hardware"));
}
std::vector<GpuSpec> library_gpus() {
  std::vector<GpuSpec> all;
  for (const std::string& n : library_names(LibraryKind::hardware)) all.push_back(library_gpu(n));
  return all;
}
std::string error_of(const cuda::DeviceInfo& d) {
  try {
    (void)validate::match_library_gpu(d, library_gpus());
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}
std::string slurp(const std::filesystem::path& p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// Every decode phase name any policy emits for a long-context step on an H100 (the names curves are
// keyed by), with its kind.
std::map<std::string, PhaseKind> policy_phase_names() {
  const ModelConfig m = load_model_file(resolve(LibraryKind::model, "llama-3.1-8b", "test", 0, "model"));
  const GpuSpec g = library_gpu("h100-sxm");
  const HostSpec h = load_host_file(resolve(LibraryKind::host, g.default_host, "test", 0, "host"));
  const Calibration cal;
  const Deployment d = make_deployment(m, g, h, cal);
  std::map<std::string, PhaseKind> names;
  for (const Policy* p : policy_catalog().policies) {
    PhaseList out;
    p->decode_attention(d, p->defaults(), StepShape{1, 32768, 0}, out);
    for (const Phase& ph : out) names[std::string(ph.name)] = ph.kind;
  }
  return names;
}
}  // namespace

TEST(GpuKit, MatchesTheDeviceToTheLibraryGpuBySmCountAndMemory) {
  cuda::DeviceInfo h100{0, "NVIDIA H100 80GB HBM3", 132, 9, 0, 81559.0 * (1 << 20), 50.0 * (1 << 20)};
  EXPECT_EQ(validate::match_library_gpu(h100, library_gpus()).name, "h100-sxm");
  cuda::DeviceInfo h100_pcie{0, "NVIDIA H100 PCIe", 114, 9, 0, 81559.0 * (1 << 20), 50.0 * (1 << 20)};
  EXPECT_EQ(validate::match_library_gpu(h100_pcie, library_gpus()).name, "h100-pcie");
}

TEST(GpuKit, AnAmbiguousOrUnknownDeviceIsAnErrorThatNamesTheCandidates) {
  // A100-80G and A800 have the same SMs and memory: the kit asks which one.
  const GpuSpec a100 = library_gpu("a100-80g");
  cuda::DeviceInfo amb{0, "NVIDIA A100-SXM4-80GB", a100.sm_count, 8, 0, a100.hbm_capacity_bytes * 0.99, 0};
  const std::string e = error_of(amb);
  EXPECT_NE(e.find("a100-80g"), std::string::npos) << e;
  EXPECT_NE(e.find("a800"), std::string::npos) << e;
  EXPECT_NE(e.find("--hardware"), std::string::npos) << e;
  cuda::DeviceInfo unknown{0, "Some Future GPU", 7, 12, 0, 3.0 * (1 << 30), 0};
  const std::string u = error_of(unknown);
  EXPECT_NE(u.find("Some Future GPU"), std::string::npos) << u;
  EXPECT_NE(u.find("scenarios/hardware"), std::string::npos) << u;
}

TEST(GpuKit, EveryCaseNamesModelPhasesThatAPolicyEmitsWithTheSameKind) {
  const auto names = policy_phase_names();
  int named = 0;
  for (const validate::Case& c : validate::emulated_cuda_cases())
    for (const std::string& n : c.model_phases) {
      ++named;
      auto it = names.find(n);
      ASSERT_NE(it, names.end()) << c.phase << " names '" << n << "', which no policy's decode step has";
      EXPECT_EQ(it->second, c.kind) << c.phase << " -> " << n;
    }
  EXPECT_GE(named, 10);
}

TEST(GpuKit, UnderTheEmulatorWithAFakeClockItWritesCurvesThePlannerFindsUnderEachPhaseName) {
  const GpuSpec gpu = library_gpu("h100-sxm");
  const validate::Ceilings ce = validate::gpu_ceilings(gpu, "the CUDA emulator (test)");
  std::vector<validate::Case> cases = validate::emulated_cuda_cases();
  ASSERT_FALSE(cases.empty());
  for (validate::Case& c : cases) c.quick = c.emu_size > 0 ? c.emu_size : c.quick;
  validate::Options o;
  o.quick = true, o.min_seconds = 0, o.sample_seconds = 0;
  o.calibration_name = "h100-sxm-measured";
  o.command = "test";
  int runs = 0;
  // Efficiency 0.6 for every instance, and count the kernels' executions.
  const validate::Timer fake = validate::fake_timer(ce, [&](const validate::Instance&) { return ++runs, 0.6; }, true);
  const Calibration uncal = load_calibration_file(resolve(LibraryKind::calibration, "roofline", "test", 0, "calibration"));
  const Calibration pub =
      load_calibration_file(resolve(LibraryKind::calibration, "h100-sxm-published", "test", 0, "calibration"));
  const auto dir = std::filesystem::temp_directory_path() / ("kvsim-gpu-kit-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const validate::Result r = validate::run_kit(cases, ce, fake, o, uncal, &pub, "h100-sxm-published",
                                               (dir / "h100-sxm-measured.yaml").string(),
                                               (dir / "h100-sxm-measured.md").string());
  EXPECT_GE(runs, int(cases.size()));
  const Calibration written = load_calibration_file((dir / "h100-sxm-measured.yaml").string());
  for (const validate::Case& c : cases)
    for (const std::string& n : c.model_phases) {
      Phase ph{n, c.kind, Device::gpu, ComputeUnit::simt, {}};
      const Ceiling cl = c.kind == PhaseKind::copy ? Ceiling::h2d : Ceiling::hbm;
      bool from_curve = false;
      const double e = written.efficiency(ph, cl, 1e6, nullptr, &from_curve);
      EXPECT_TRUE(from_curve) << n << " (" << c.phase << ") has no curve on " << kCeilingNames[size_t(cl)];
      EXPECT_NEAR(e, 0.6, 1e-3) << n;
    }
  const std::string report = slurp(dir / "h100-sxm-measured.md");
  EXPECT_NE(report.find("| cuda_opt_sparse_paged | paged_attention | attention | hbm |"), std::string::npos) << report;
  EXPECT_NE(report.find("h100-sxm-published"), std::string::npos);
  // The published attention curve is over bytes, ours over context tokens: the report reads it at the
  // point's bytes, as the planner would (the first H200 run's report fell back to the constant 1.0).
  std::istringstream lines(report);
  int attention_rows = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("| cuda_opt_paged_decode | attention |", 0) != 0) continue;
    std::vector<std::string> cols;
    std::istringstream cells(line);
    for (std::string cell; std::getline(cells, cell, '|');) cols.push_back(cell);
    ASSERT_GE(cols.size(), 8u) << line;
    const double published = std::stod(cols[7]);
    EXPECT_GT(published, 0.05) << line;
    EXPECT_LT(published, 0.95) << line;
    ++attention_rows;
  }
  EXPECT_GT(attention_rows, 0) << report;
  std::filesystem::remove_all(dir);
}
