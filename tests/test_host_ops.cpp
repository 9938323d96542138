// Host phases run as framework operators (model/host_ops.hpp): a measured profile, scaled to the target
// host by cores, clock and DRAM bandwidth, costs the phases it names in the roofline and the simulator.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "core/error.hpp"
#include "model/deployment.hpp"
#include "model/implementation.hpp"
#include "model/resources.hpp"
#include "model/roofline.hpp"
#include "sim/step_graph.hpp"
#include "tests/test_util.hpp"

namespace kvsim {
namespace {

// A profile measured on a 2-core host at 4 GHz: 100 us per layer fixed, and 1 GB/s per thread at
// 1 MB per layer falling to 0.5 GB/s at 4 MB.
std::shared_ptr<const HostOpsProfile> profile(double measured_clock_hz) {
  auto p = std::make_shared<HostOpsProfile>();
  p->name = "test";
  p->measured_on.clock_hz = measured_clock_hz;
  p->threads = 2;
  HostOpsPhase ph;
  ph.name = "cpu_rerank";
  ph.fixed_s = 100e-6;
  ph.rate_per_thread.points = {{1e6, 1e9}, {4e6, 0.5e9}};
  p->phases.push_back(ph);
  return p;
}

Machine target(double cores, double dram, double clock_ratio, const Calibration& cal) {
  Machine m;
  m.host_cores = cores;
  m.host_compute = cores * 10e9;
  m.dram = dram;
  m.calibration = &cal;
  HostOpsOnTarget t;
  t.profile = profile(4e9);
  t.time_scale = t.rate_time_scale = 1 / clock_ratio;
  t.clock_known = t.all_core_known = true;
  m.host_ops = std::make_shared<const HostOpsOnTarget>(t);
  return m;
}

Phase rerank(double bytes_per_layer, double layers) {
  Phase p{"cpu_rerank", PhaseKind::host_kernel, Device::cpu, ComputeUnit::host,
          {.flops = 1e12, .dram_bytes = bytes_per_layer * layers, .launches = 1e6}};
  p.stream = Stream::host;
  p.repeat = float(layers);
  p.lanes = 8;  // the native reading's pieces: ignored for a framework phase
  return p;
}

// 32 layers of 1 MB on 56 cores at the measured clock: 56 x 1 GB/s caps nothing at 300 GB/s of DRAM,
// so each layer pays 100 us + 1 MB / 56 GB/s. The FLOPs and the million calls of the native reading
// are not charged: the measured time holds the operators' arithmetic and their calls.
TEST(HostOps, AFrameworkPhasePaysItsMeasuredFixedTimePerLayerAndItsPerThreadRateOnEveryCore) {
  Calibration cal;
  const Machine m = target(56, 300e9, 1.0, cal);
  const PhaseTime t = roofline(rerank(1e6, 32), m);
  EXPECT_DOUBLE_EQ(t.seconds, 32 * 1e6 / 56e9 + 32 * 100e-6);
  EXPECT_EQ(t.bound, Bound::latency);
  EXPECT_FALSE(t.extrapolated);
  // On 2 cores the same work is bound by the two threads' rate.
  const PhaseTime two = roofline(rerank(1e6, 32), target(2, 300e9, 1.0, cal));
  EXPECT_DOUBLE_EQ(two.seconds, 32 * 1e6 / 2e9 + 32 * 100e-6);
  EXPECT_EQ(two.bound, Bound::dram);
  // 4 MB per layer: the rate falls to 0.5 GB/s per thread, as measured.
  EXPECT_DOUBLE_EQ(roofline(rerank(4e6, 1), target(2, 300e9, 1.0, cal)).seconds, 4e6 / 1e9 + 100e-6);
}

// The scaling rule: a core twice as fast halves the fixed time and doubles each thread's rate; the
// host's DRAM bandwidth caps the rate however many cores there are.
TEST(HostOps, TheProfileScalesByClockAndCoresAndIsCappedByDram) {
  Calibration cal;
  EXPECT_DOUBLE_EQ(roofline(rerank(1e6, 1), target(2, 300e9, 2.0, cal)).seconds, 1e6 / 4e9 + 50e-6);
  EXPECT_DOUBLE_EQ(roofline(rerank(1e6, 1), target(1000, 100e9, 1.0, cal)).seconds, 1e6 / 100e9 + 100e-6);
  // Read outside the measured bytes, the end value applies and the phase is flagged extrapolated.
  EXPECT_TRUE(roofline(rerank(16e6, 1), target(2, 300e9, 1.0, cal)).extrapolated);
  // A phase the profile does not name keeps the native costs (here: no lanes, every core, 300 GB/s).
  Phase other = rerank(1e6, 1);
  other.name = "cpu_attention";
  other.lanes = 0;
  other.work.launches = 0;
  EXPECT_DOUBLE_EQ(roofline(other, target(2, 300e9, 1.0, cal)).seconds, 1e12 / 20e9);
}

// The plan's note says how the profile was scaled: cores, DRAM, and the clock ratio target / measured.
TEST(HostOps, TheNoteStatesTheScaling) {
  Calibration cal;
  HostOpsOnTarget t = *target(2, 300e9, 1.0, cal).host_ops;
  t.time_scale = 4.0 / 3.2;  // the target's clock 3.2 GHz against the measuring host's 4 GHz
  const std::string note = host_ops_note(t, 56, 300e9);
  EXPECT_NE(note.find("scaled to 56 cores, 300 GB/s of DRAM and a clock 0.80x the measuring host's"), std::string::npos)
      << note;
  t.clock_known = false;
  EXPECT_NE(host_ops_note(t, 56, 300e9).find("not scaled by clock"), std::string::npos);
}

// The clock is scaled only when both hosts have one: a target without clock_ghz keeps the measured times
// and says so, as does a deployment with no host.
TEST(HostOps, AHostWithoutAClockIsNotScaledAndTheNoteSaysSo) {
  Implementation impl;
  auto prof = std::make_shared<HostOpsProfile>(*profile(4e9));
  impl.host_ops = prof;
  HostSpec clockless;
  clockless.clock_hz = 0;
  HostSpec fast;
  fast.clock_hz = 8e9;
  const HostSpec* const hosts[] = {&clockless, nullptr, &fast};
  for (const HostSpec* h : hosts) {
    Deployment d;
    d.host = h;
    apply_implementation(d, impl);
    ASSERT_NE(d.machine.host_ops, nullptr);
    const bool known = h == &fast;
    EXPECT_EQ(d.machine.host_ops->clock_known, known);
    EXPECT_DOUBLE_EQ(d.machine.host_ops->time_scale, known ? 0.5 : 1.0);
    EXPECT_EQ(host_ops_note(*d.machine.host_ops, 2, 100e9).find("not scaled by clock") != std::string::npos, !known);
  }
}

// Alone in the simulator, a framework phase takes exactly its roofline time.
TEST(HostOps, AFrameworkPhaseAloneInTheSimulatorTakesItsRoofline) {
  Calibration cal;
  const Machine m = target(56, 300e9, 1.2, cal);
  const Phase p = rerank(3e6, 32);
  const double rt = roofline(p, m).seconds;
  sim::StepGraph g(size_t(sim::Resource::count));
  g.add_phase(sim::to_sim_phase(p, m));
  EXPECT_NEAR(g.run(sim::capacities(m)).makespan, rt, rt * 1e-12);
}

// A host that borrows another's measured call and region costs scales them by one core's clock: a core
// twice as fast pays half; without a clock on either side they are borrowed as measured.
TEST(HostOps, BorrowedCallAndRegionCostsScaleByTheClockRatio) {
  Calibration cal;
  cal.host_threads = {.call_s = 1e-6, .region_s = 40e-6, .core_dram = 20e9, .clock_hz = 4e9};
  GpuSpec g = test::gpu("h100-sxm");
  HostSpec h = test::host("xeon-w9-3495x");
  h.clock_hz = 8e9;
  Machine m = make_machine(g, h, DType::bf16, DType::bf16, true, cal);
  EXPECT_DOUBLE_EQ(m.host_threads.call_s, 0.5e-6);
  EXPECT_DOUBLE_EQ(m.host_threads.region_s, 20e-6);
  EXPECT_DOUBLE_EQ(m.host_threads.core_dram, 20e9);  // bandwidth is not a per-call cost
  h.clock_hz = 0;
  m = make_machine(g, h, DType::bf16, DType::bf16, true, cal);
  EXPECT_DOUBLE_EQ(m.host_threads.call_s, 1e-6);
}

std::string write(const std::string& name, const std::string& text) {
  const std::string path = (std::filesystem::temp_directory_path() / name).string();
  std::ofstream(path) << text;
  return path;
}

// The thread law (issue 41 item 3): the measured 2-thread rate carries to n threads by the universal
// scalability law, up to its peak team (or the measured team, if the peak is below it), never more
// threads than the target's cores; sigma = kappa = 0 is
// linear in cores, and the law and the team are in the plan's note.
TEST(HostOps, ThreadsScaleByTheProfilesLawUpToItsPeakTeam) {
  Calibration cal;
  Machine m = target(56, 1e12, 1.0, cal);
  auto prof = std::make_shared<HostOpsProfile>(*profile(4e9));
  prof->scaling = {.sigma = 0.0, .kappa = 2.24e-3, .source = "fit"};
  HostOpsOnTarget t = *m.host_ops;
  t.profile = prof;
  m.host_ops = std::make_shared<const HostOpsOnTarget>(t);
  const double peak = std::sqrt(1 / 2.24e-3);  // 21.1 threads
  EXPECT_NEAR(prof->scaling.team(56, 2), peak, 1e-12);
  EXPECT_DOUBLE_EQ(prof->scaling.team(8, 2), 8);
  EXPECT_DOUBLE_EQ(prof->scaling.team(1, 2), 1);  // one core runs one thread, whatever was measured
  const double u = prof->scaling.throughput(peak) / prof->scaling.throughput(2);
  EXPECT_GT(u, 5.0);
  EXPECT_LT(u, 6.0);  // far below 28x, linear's 56 / 2
  // 1 MB per layer at 1 GB/s per measured thread: 2 GB/s x U(21.1) / U(2).
  EXPECT_NEAR(roofline(rerank(1e6, 1), m).seconds, 1e6 / (2e9 * u) + 100e-6, 1e-15);
  // More cores than the peak team buy nothing.
  Machine more = m;
  more.host_cores = 112;
  EXPECT_DOUBLE_EQ(roofline(rerank(1e6, 1), more).seconds, roofline(rerank(1e6, 1), m).seconds);
  const std::string note = host_ops_note(t, 56, 1e12);
  EXPECT_NE(note.find("universal scalability law (sigma 0, kappa 0.00224, fit): a team of 21 threads"), std::string::npos)
      << note;
  // The all-core clocks: a target whose all-core clock is 0.68x the measured one slows the rate by it.
  Machine slow = m;
  t.rate_time_scale = 1 / 0.68;
  slow.host_ops = std::make_shared<const HostOpsOnTarget>(t);
  EXPECT_NEAR(roofline(rerank(1e6, 1), slow).seconds, 1e6 / (2e9 * u * 0.68) + 100e-6, 1e-15);
}

// A host's all-core clock is at most its single-core clock; the error names the field and the value.
TEST(HostOps, AnAllCoreClockAboveTheSingleCoreClockIsAnError) {
  const YAML::Node n = YAML::Load(
      "name: h\nsockets: 1\ncores: 8\nclock_ghz: 3.0\nall_core_clock_ghz: 3.5\ndram: {capacity_gib: 64, bandwidth_gbs: 100}\n"
      "compute: {fp32_gflops: 1000}\n");
  try {
    load_host(YamlMap(n, "h.yaml", ""));
    FAIL() << "accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("all_core_clock_ghz"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("3.5"), std::string::npos) << e.what();
  }
}

// Bad profiles are errors naming the file and field: unsorted points, a host that does not exist, a
// framework scenario without a profile.
TEST(HostOps, BadProfilesAreErrorsThatNameTheFieldAndTheValue) {
  const std::string head = "schema: kvsim.host_profile/1\nname: t\nmeasured_on: ci-2core\nthreads: 2\nphases:\n";
  const std::string good = write("kvsim_host_ops_good.yaml", head + "  cpu_rerank: {fixed_us: 10, points: [[1, 1], [2, 1]]}\n");
  const HostOpsProfile p = load_host_ops_file(good);
  ASSERT_NE(p.find("cpu_rerank"), nullptr);
  EXPECT_GT(p.measured_on.clock_hz, 0);  // ci-2core's measured clock
  EXPECT_EQ(p.find("cpu_attention"), nullptr);
  const std::string unsorted = write("kvsim_host_ops_unsorted.yaml", head + "  cpu_rerank: {fixed_us: 10, points: [[2, 1], [1, 1]]}\n");
  try {
    load_host_ops_file(unsorted);
    FAIL() << "unsorted points accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("phases.cpu_rerank.points[1]"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(unsorted), std::string::npos) << e.what();
  }
  // The thread law: only USL, its parameters in [0, 1]; errors name the field and the value.
  auto law_error = [&](const std::string& file, const std::string& scaling) {
    const std::string path = write(file, "schema: kvsim.host_profile/1\nname: t\nmeasured_on: ci-2core\nthreads: 2\n"
                                         "thread_scaling: " + scaling + "\nphases:\n  cpu_rerank: {fixed_us: 10, points: [[1, 1]]}\n");
    try {
      load_host_ops_file(path);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  const std::string amdahl = law_error("kvsim_host_ops_law.yaml", "{law: amdahl, sigma: 0, kappa: 0.002, source: s}");
  EXPECT_NE(amdahl.find("thread_scaling.law"), std::string::npos) << amdahl;
  EXPECT_NE(amdahl.find("amdahl"), std::string::npos) << amdahl;
  const std::string kappa = law_error("kvsim_host_ops_kappa.yaml",
                                      "{law: usl, sigma: 0, kappa: 2, source: s, slow: {sigma: 0.1, kappa: 0.02, source: s}}");
  EXPECT_NE(kappa.find("thread_scaling.kappa"), std::string::npos) << kappa;
  const std::string slow = law_error("kvsim_host_ops_slow.yaml",
                                     "{law: usl, sigma: 0, kappa: 0.002, source: s, slow: {sigma: 1.5, kappa: 0.02, source: s}}");
  EXPECT_NE(slow.find("thread_scaling.slow.sigma"), std::string::npos) << slow;
  const std::string nohost = write("kvsim_host_ops_nohost.yaml",
                                   "schema: kvsim.host_profile/1\nname: t\nmeasured_on: no-such-host\nthreads: 2\nphases:\n"
                                   "  cpu_rerank: {fixed_us: 10, points: [[1, 1]]}\n");
  EXPECT_THROW(load_host_ops_file(nohost), InputError);
  const YAML::Node impl = YAML::Load("host_ops: framework\n");
  try {
    load_implementation(YamlMap(impl, "s.yaml", "implementation"));
    FAIL() << "framework without a profile accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("implementation.host_profile"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kvsim
