// Kernel models (model/kernel_model.hpp; issue 41 item 1): a GPU phase with no curve of its own is
// priced by a model of the kernel a deployment runs — launches, passes, parallelism, per-call copy
// costs — never by the roofline's fallback constant; the bare roofline stays the bound.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "core/error.hpp"
#include "model/library.hpp"
#include "model/resources.hpp"
#include "model/roofline.hpp"
#include "test_util.hpp"
#include "validate/kernel_model_check.hpp"

namespace kvsim {
namespace {

// A torch.topk call over `rows` rows of `n` fp32 scores, as policies/blocks.hpp's select writes it.
Phase topk(double rows, double n, double k = 64) {
  Phase p{"t", PhaseKind::select, Device::gpu, ComputeUnit::simt, {}};
  p.work.flops = rows * n * 4;
  p.work.hbm_bytes = rows * (n * 4 + k * 4);
  p.work.launches = 1;
  p.rows = float(rows);
  p.row_elements = float(n);
  return p;
}

Phase copy_runs(double runs, double run_bytes) {
  Phase p{"c", PhaseKind::copy, Device::pcie, ComputeUnit::simt, {}};
  p.stream = Stream::h2d;
  p.work.h2d_bytes = p.work.hbm_bytes = p.work.dram_bytes = runs * run_bytes;
  p.work.launches = 1;
  p.run_bytes = run_bytes;
  return p;
}

struct Rig {
  bool on = (set_kernel_models(true), true);  // the default; set in case the environment says 0
  GpuSpec gpu = test::gpu("h100-sxm");
  HostSpec host = test::host(gpu.default_host);
  Calibration cal = default_calibration(gpu, host);  // the published curves: what `kvsim plan` uses
  Calibration roof;                                   // every efficiency 1, uncalibrated
  Machine m, bound;
  Rig() {
    m = make_machine(gpu, host, DType::bf16, DType::bf16, true, cal);
    bound = make_machine(gpu, host, DType::bf16, DType::bf16, true, roof);
  }
};

TEST(KernelModels, ATopkAtBatchOneIsPricedByTheModelAndSlowerThanTheRoofline) {
  Rig r;
  const Phase p = topk(1, 4096);
  const PhaseTime t = roofline(p, r.m), b = roofline(p, r.bound);
  EXPECT_EQ(t.kernel, KernelModelId::torch_topk);
  EXPECT_EQ(b.kernel, KernelModelId::none);
  // One block on one SM of 132, 17 passes: far above the bound (a launch and 33 KB at full bandwidth).
  EXPECT_GT(t.seconds, 5 * b.seconds);
  // The bound is the roofline exactly: launches x latency + bytes / HBM.
  EXPECT_NEAR(b.seconds, p.work.launches * r.m.kernel_latency + p.work.hbm_bytes / r.m.hbm, 1e-15);
}

TEST(KernelModels, TheMultiBlockPathStartsWherePyTorchsTableSays) {
  Rig r;
  // 4 rows: single block below 20000 scores per row, multi-block at 20000 and above. The multi-block
  // path launches 12 kernels instead of 2, so at the threshold its fixed time is higher; but it uses
  // every SM, so past it the time grows far more slowly per score.
  const double below = roofline(topk(4, 19999), r.m).seconds, at = roofline(topk(4, 20000), r.m).seconds;
  const double far = roofline(topk(4, 200000), r.m).seconds;
  const double single_far = kernel_model_extra_s(topk(4, 19999), r.m);
  EXPECT_GT(single_far, 0);  // the single-block path waits on dependent loads at 20K scores per row
  EXPECT_LT(at, below);      // 17 serial passes on 4 SMs cost more than 12 launches over the GPU
  EXPECT_LT(far - at, 10 * (below - roofline(topk(4, 2000), r.m).seconds));
}

TEST(KernelModels, ASelectionNeverGetsFasterWhenItsRowsGrow) {
  Rig r;
  for (double rows : {1.0, 4.0, 32.0, 256.0, 4096.0}) {
    double last = 0;
    for (double n = 16; n <= 1 << 22; n *= 2) {
      // Across PyTorch's switch to the multi-block path a longer row may be cheaper than a shorter
      // one on the single-block path: compare only within one path.
      const Phase p = topk(rows, n);
      const double t = roofline(p, r.m).seconds;
      const bool switched = (rows <= 20 && n == 32768) || (rows > 20 && rows <= 40 && n == 16384) ||
                            (rows > 80 && rows < 200 && n == 8192) || (rows >= 200 && rows < 800 && n == 4096) ||
                            (rows > 4000 && n == 512) || (rows >= 800 && rows <= 4000 && n == 1024);
      if (!switched) { EXPECT_GE(t, last * (1 - 1e-12)) << rows << " x " << n; }
      last = t;
    }
  }
}

TEST(KernelModels, ACopyPaysOneCallPerDeclaredLaunchAndItsRunsOnlyInTheLinkRate) {
  Rig r;
  Phase one = copy_runs(1, 1 << 20), calls = copy_runs(1, 1 << 20), runs = copy_runs(4096, 256);  // 1 MiB each
  calls.work.launches = 4096;  // an implementation that issues a call per 256-byte run declares them
  const PhaseTime a = roofline(one, r.m), c = roofline(calls, r.m), g = roofline(runs, r.m);
  EXPECT_EQ(c.kernel, KernelModelId::copy_calls);
  EXPECT_GE(c.seconds, 4096 * kernel_constants::kCopyCallS);
  EXPECT_LT(a.seconds, 100e-6);  // one call and 1 MiB over a ~35 GB/s link
  // Packed into one call, short runs cost only the link's gather share (each run in its own TLPs):
  // more than one block, far less than a call per run, and never less than the bound beside it.
  EXPECT_GT(g.seconds, a.seconds);
  EXPECT_LT(g.seconds, 4096 * kernel_constants::kCopyCallS);
  EXPECT_GE(g.seconds, roofline(runs, r.bound).seconds);
  // The bound knows nothing of calls: the same bytes at the link rate plus its launches.
  EXPECT_NEAR(roofline(calls, r.bound).seconds - roofline(one, r.bound).seconds, 4095 * r.bound.kernel_latency, 1e-12);
}

TEST(KernelModels, APhaseAloneTakesTheSameTimeInTheSimulator) {
  Rig r;
  const auto caps = sim::capacities(r.m);
  for (const Phase& p : {topk(1, 4096), topk(64, 65536), copy_runs(512, 4096)}) {
    const sim::SimPhase s = sim::to_sim_phase(p, r.m);
    double work = 0;
    for (size_t i = 0; i < s.amount.size(); ++i)
      if (s.amount[i] > 0) work = std::max(work, s.amount[i] / caps[i]);
    EXPECT_NEAR(std::max(work, s.min_seconds) + s.latency, roofline(p, r.m).seconds, 1e-12 * roofline(p, r.m).seconds);
  }
}

TEST(KernelModels, AreOnByDefaultAndOffWhenAskedFor) {
  // The parsed document is kept in a variable: a loop over a member of a temporary reads freed memory.
  const auto on = test::run_kvsim("plan --format json");
  ASSERT_EQ(on.exit_code, 0) << on.out;
  const nlohmann::json jon = nlohmann::json::parse(on.out);
  size_t modeled = 0;
  for (const auto& r : jon["results"]) modeled += r["modeled_phases"].size();
  EXPECT_GT(modeled, 0u);
  // KVSIM_KERNEL_MODELS=0: the fallback constants again, and the plan lists those phases as unmeasured.
  const auto off = test::run_command(std::string("KVSIM_KERNEL_MODELS=0 '") + KVSIM_BINARY + "' plan --format json");
  ASSERT_EQ(off.exit_code, 0) << off.out;
  const nlohmann::json joff = nlohmann::json::parse(off.out);
  size_t unmeasured = 0;
  for (const auto& r : joff["results"]) {
    EXPECT_TRUE(r["modeled_phases"].empty()) << r["policy"];
    unmeasured += r["unmeasured_phases"].size();
  }
  EXPECT_GT(unmeasured, 0u);
}

TEST(KernelModels, AGpuPhaseOfTheDefaultPlanIsNeverAtTheFallbackConstant) {
  const auto run = test::run_kvsim("plan --format json");
  ASSERT_EQ(run.exit_code, 0) << run.out;
  const auto j = nlohmann::json::parse(run.out);
  int modeled = 0;
  for (const auto& r : j["results"]) {
    if (!r.contains("unmeasured_phases")) continue;
    EXPECT_TRUE(r["unmeasured_phases"].empty()) << r["policy"] << ": " << r["unmeasured_phases"].dump();
    modeled += int(r["modeled_phases"].size());
  }
  EXPECT_GT(modeled, 0);
}

TEST(KernelModels, TheCheckFileNamesTheFieldOfABadPoint) {
  const std::string path = test::write_temp("km.yaml",
                                            "schema: kvsim.kernel_checks/1\n"
                                            "points:\n"
                                            "  - {id: a, model: torch_topk, gpu: h100-sxm, rows: 1, n: 8, k: 2,\n"
                                            "     measured_us: -3, verified: true, source: x}\n");
  try {
    (void)validate::check_kernel_models(path);
    FAIL() << "a negative time was accepted";
  } catch (const InputError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("points[0].measured_us"), std::string::npos) << m;
    EXPECT_NE(m.find("-3"), std::string::npos) << m;
  }
}

TEST(KernelModels, EveryModelIsCheckedOnThreePublishedPointsFromTwoSources) {
  const validate::KernelCheckReport r =
      validate::check_kernel_models(library_dir() + "/measurements/kernel-models.yaml");
  for (const auto& s : r.models) {
    EXPECT_GE(s.points, 3) << to_string(s.model);
    EXPECT_GE(s.sources, s.model == KernelModelId::gemv_scoring ? 0 : 2) << to_string(s.model);
  }
  EXPECT_TRUE(r.unexplained.empty());
}

}  // namespace
}  // namespace kvsim
