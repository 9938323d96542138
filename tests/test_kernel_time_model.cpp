// The kernel time model (validate/kernel_time_model.hpp): its arithmetic on launches whose answer is
// worked out by hand, occupancy limits, the call's host/device overlap rule, the library's constants
// file (every library GPU has an entry; clocks derived from the datasheet FP32 rate), and one real kernel
// through the emulator and the model with a known chain. No timing is measured here.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "kernels/emu/checker.hpp"
#include "kernels/emu/counters.hpp"
#include "model/library.hpp"
#include "tests/checker_kernels.hpp"
#include "tests/test_util.hpp"
#include "validate/kernel_time_model.hpp"

using namespace kvsim;
using validate::TimeModelGpu;

namespace {

GpuSpec library_gpu(const std::string& name) {
  return load_gpu_file(resolve(LibraryKind::hardware, name, "test", 0, "hardware"));
}
std::string microarch_file() { return library_dir() + "/measurements/gpu-microarchitecture.yaml"; }

// A made-up GPU with round numbers: 100 SMs at 1 GHz, 1 TB/s, 1 us per kernel, 4 us per host launch.
TimeModelGpu round_gpu() {
  TimeModelGpu g;
  g.spec.name = "round";
  g.spec.sm_count = 100;
  g.spec.hbm_bandwidth = 1e12;
  g.spec.kernel_latency = 1e-6;
  g.spec.host_launch_latency = 4e-6;
  g.spec.h2d_pinned = 1e10;
  g.clock_hz = 1e9;
  g.t_call = 2e-6;
  auto& a = g.arch;
  a.threads_per_sm = 2048, a.blocks_per_sm = 32, a.shared_per_sm = 100 * 1024;
  a.l2_cycles = 200, a.dram_cycles = 500, a.shared_cycles = 30, a.barrier_cycles = 30;
  return g;
}

emu::LaunchCounts launch(unsigned blocks, unsigned threads) {
  emu::LaunchCounts c;
  c.kernel = "k";
  c.grid = dim3(blocks, 1, 1);
  c.block = dim3(threads, 1, 1);
  return c;
}

TEST(KernelTimeModel, ChainBoundLaunchByHand) {
  // 1000 blocks of 256 threads: 8 blocks per SM (2048 threads), 800 at once, 2 waves. Half the requested
  // load sectors are first touches: 0.5 x 500 + 0.5 x 200 = 350 cycles per load. Per wave
  // 100 x 350 + 10 x 30 + 2 x 30 = 35,360 cycles = 35.36 us at 1 GHz; 2 waves 70.72 us, against a memory
  // term of 1e6 sectors x 32 B / 1 TB/s = 32 us. Plus 1 us for the kernel.
  emu::LaunchCounts c = launch(1000, 256);
  c.unique_sectors = 1000000, c.unique_read_sectors = 1000000, c.load_sectors = 2000000;
  c.chain_global = 100, c.chain_shared = 10, c.barriers = 2;
  const auto t = validate::predict_launch(c, round_gpu());
  EXPECT_DOUBLE_EQ(t.blocks_per_sm, 8);
  EXPECT_DOUBLE_EQ(t.waves, 2);
  EXPECT_NEAR(t.t_memory, 32e-6, 1e-12);
  EXPECT_NEAR(t.t_chain, 70.72e-6, 1e-12);
  EXPECT_NEAR(t.seconds, 71.72e-6, 1e-12);
  EXPECT_STREQ(t.bound, "chain");
}

TEST(KernelTimeModel, MemoryBoundWhenChainsAreShort) {
  emu::LaunchCounts c = launch(800, 256);
  c.unique_sectors = 1000000, c.unique_read_sectors = 1000000, c.load_sectors = 1000000;
  c.chain_global = 8;  // 8 x 500 cycles = 4 us, one wave
  const auto t = validate::predict_launch(c, round_gpu());
  EXPECT_DOUBLE_EQ(t.waves, 1);
  EXPECT_NEAR(t.t_chain, 4e-6, 1e-12);
  EXPECT_NEAR(t.seconds, 33e-6, 1e-12);
  EXPECT_STREQ(t.bound, "memory");
}

TEST(KernelTimeModel, SharedMemoryAndBlockSizeLimitOccupancy) {
  emu::LaunchCounts c = launch(1000, 256);
  c.dynamic_shared_bytes = 30 * 1024, c.static_shared_bytes = 10 * 1024;  // 40 KiB: 2 per SM of 100 KiB
  EXPECT_DOUBLE_EQ(validate::predict_launch(c, round_gpu()).blocks_per_sm, 2);
  EXPECT_DOUBLE_EQ(validate::predict_launch(c, round_gpu()).waves, 5);
  emu::LaunchCounts big = launch(10, 1024);  // 2 per SM by threads
  EXPECT_DOUBLE_EQ(validate::predict_launch(big, round_gpu()).blocks_per_sm, 2);
  emu::LaunchCounts small = launch(10, 16);  // a partial warp counts as a warp: 64 by threads, 32 by blocks
  EXPECT_DOUBLE_EQ(validate::predict_launch(small, round_gpu()).blocks_per_sm, 32);
}

TEST(KernelTimeModel, ACallOverlapsHostAndDeviceUnlessItSynchronizes) {
  emu::Counts calls;
  for (int i = 0; i < 3; ++i) calls.launches.push_back(launch(1, 32));  // 1 us each on the device
  // Host: 3 x 4 us = 12 us; device: 3 us. Back to back, the host bounds the stream.
  auto r = validate::predict_call(calls, round_gpu());
  EXPECT_NEAR(r.device, 3e-6, 1e-12);
  EXPECT_NEAR(r.host, 12e-6, 1e-12);
  EXPECT_NEAR(r.seconds, 12e-6, 1e-12);
  EXPECT_EQ(r.bound, "host");
  // A blocking copy of 10 kB (1 us at 10 GB/s, 2 us of call) synchronizes: the two sides add up.
  calls.copies = 1, calls.copy_bytes = 10000, calls.host_syncs = 1;
  r = validate::predict_call(calls, round_gpu());
  EXPECT_NEAR(r.device, 4e-6, 1e-12);
  EXPECT_NEAR(r.host, 14e-6, 1e-12);
  EXPECT_NEAR(r.seconds, 18e-6, 1e-12);
}

TEST(KernelTimeModel, EveryLibraryGpuHasConstantsAndItsDatasheetClock) {
  for (const std::string& n : library_names(LibraryKind::hardware)) {
    const TimeModelGpu g = validate::load_time_model_gpu(library_gpu(n), microarch_file());
    EXPECT_GT(g.clock_hz, 0.9e9) << n;
    EXPECT_LT(g.clock_hz, 3.0e9) << n;
    EXPECT_GT(g.arch.dram_cycles, g.arch.l2_cycles) << n;
  }
  // Known boost clocks: H100 SXM 1980 MHz, A100 1410 MHz, V100 SXM2 1530 MHz.
  EXPECT_NEAR(validate::load_time_model_gpu(library_gpu("h100-sxm"), microarch_file()).clock_hz, 1980e6, 20e6);
  EXPECT_NEAR(validate::load_time_model_gpu(library_gpu("a100-80g"), microarch_file()).clock_hz, 1410e6, 15e6);
  EXPECT_NEAR(validate::load_time_model_gpu(library_gpu("v100-32g"), microarch_file()).clock_hz, 1530e6, 15e6);
}

TEST(KernelTimeModel, AGpuMissingFromTheFileIsAnErrorNamingIt) {
  GpuSpec g = library_gpu("h200");
  g.name = "h999";
  try {
    (void)validate::load_time_model_gpu(g, microarch_file());
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("h999"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("gpu-microarchitecture.yaml"), std::string::npos) << e.what();
  }
}

TEST(KernelTimeModel, AnEmulatedKernelWithAKnownChain) {
  if (!emu::checker::enabled()) GTEST_SKIP() << "the access checker is compiled out of this build";
  emu::Counts counts;
  {
    emu::CountScope scope;
    test::checker_kernels::chain_of_loads();
    counts = scope.counts();
  }
  ASSERT_EQ(counts.launches.size(), 1u);
  // chain_kernel: 7 global steps (64 first touches of 64 requested sectors... plus repeats), 1 shared, 1 barrier.
  const auto t = validate::predict_launch(counts.launches[0], round_gpu());
  const auto& c = counts.launches[0];
  const double f = double(c.unique_read_sectors) / double(c.load_sectors + c.atomic_sectors);
  EXPECT_GT(f, 0);
  EXPECT_LE(f, 1);
  const double cycles = 7 * (f * 500 + (1 - f) * 200) + 1 * 30 + 1 * 30;
  EXPECT_NEAR(t.t_chain, cycles / 1e9, 1e-15);
  EXPECT_DOUBLE_EQ(t.waves, 1);
}

// The command end to end on the kit's top-k case: every grid point run through the emulator at the kit's
// size, priced, and set beside the H200 kit's measurement (four points in
// scenarios/calibration/h200-measured.yaml; measured on the one-block kernel, before rows were split
// over blocks); each point's launches are the split select's (3 passes, counts, compaction, tile sort,
// and two merge rounds at 1M). No time is asserted.
TEST(KernelTimeModel, PredictCommandComparesTheKitsTopkPoints) {
  if (!emu::checker::enabled()) GTEST_SKIP() << "the access checker (the emulator's counts) is compiled out";
  const std::string out = std::string(::testing::TempDir()) + "predict-topk.json";
  const auto r = test::run_kvsim("validate --device emu --predict h200 --filter cuda_opt_topk --format json --report '" +
                                 out + "'");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const nlohmann::json j = nlohmann::json::parse(test::read_text(out));
  EXPECT_EQ(j["gpu"], "h200");
  // The four H200 points were measured on the one-block kernel: shown beside the prediction, and left
  // out of the statistics because their source names other kernels than the case runs now.
  EXPECT_EQ(j["compared"], 0);
  EXPECT_EQ(j["earlier_kernel_points"], 4);
  ASSERT_EQ(j["points"].size(), 4u);
  for (const auto& p : j["points"]) {
    EXPECT_EQ(p["launches"], p["size"].get<double>() > 300000 ? 8 : 6) << p["size"];
    EXPECT_EQ(p["launch_times"].size(), p["launches"].get<size_t>());
    EXPECT_GT(p["chain_global"].get<double>(), 0);
    EXPECT_GT(p["measured_s"].get<double>(), 0);
    EXPECT_TRUE(p["earlier_kernel"].get<bool>());
    EXPECT_GT(p["predicted_s"].get<double>(), p["bound_s"].get<double>());
  }
}

// --phases: the phase traffic's counted launches priced on the GPU, at a library model's heads: every
// linked phase gets a predicted call and its model bytes' bound; unlinked phases get neither.
TEST(KernelTimeModel, PhasesArePricedAtAModelsShape) {
  if (!emu::checker::enabled()) GTEST_SKIP() << "the access checker (the emulator's counts) is compiled out";
  const std::string out = std::string(::testing::TempDir()) + "predict-phases.json";
  const auto r = test::run_kvsim("validate --device emu --predict h200 --phases --policy quest --policy chess "
                                 "--model llama-3.2-3b --context 8192 --format json --report '" + out + "'");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const nlohmann::json j = nlohmann::json::parse(test::read_text(out));
  EXPECT_EQ(j["priced_on"], "h200");
  EXPECT_EQ(j["shape"]["model"], "llama-3.2-3b");
  EXPECT_EQ(j["shape"]["context"], 8192);
  const nlohmann::json phases = j["phases"];
  int linked = 0;
  for (const auto& p : phases) {
    if (!p["linked"].get<bool>()) {
      EXPECT_FALSE(p.contains("predicted_s")) << p["phase"];
      continue;
    }
    ++linked;
    EXPECT_GT(p["predicted_s"].get<double>(), 1.3e-6) << p["phase"];  // at least the H200's kernel_us
    EXPECT_GT(p["bound_s"].get<double>(), 0) << p["phase"];
    EXPECT_FALSE(p["time_bound"].get<std::string>().empty()) << p["phase"];
  }
  EXPECT_GE(linked, 6);
}

TEST(KernelTimeModel, PredictCommandBadInputsAreErrors) {
  for (const std::string& args : {std::string("validate --device emu --predict no-such-gpu"),
                                  std::string("validate --device emu --phases"),
                                  std::string("validate --device emu --predict h200 --phases --hardware h100-sxm"),
                                  std::string("validate --device emu --model no-such-model"),
                                  std::string("validate --device emu --predict h200 --model llama-3.2-3b"),
                                  std::string("validate --device cpu --context 4096"),
                                  std::string("validate --predict h200"),
                                  std::string("validate --device emu --predict h200 --filter no-such-case"),
                                  std::string("validate --device emu --predict h200 --format csv")}) {
    const auto r = test::run_kvsim(args);
    EXPECT_NE(r.exit_code, 0) << args;
    EXPECT_NE(r.out.find("error"), std::string::npos) << args << ": " << r.out;
  }
}

}  // namespace
