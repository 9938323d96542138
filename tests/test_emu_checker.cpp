// The CUDA emulator as a checker (kernels/emu/checker.hpp, issue #28 item 1): one test per planted
// fault class (tests/checker_kernels.cu), each also run without its fault, which must pass with the
// right result (no false positive); the proof that every __syncthreads of the optimized top-k and
// paged-decode kernels is needed; and the per-launch traffic counts on kernels whose answer is known
// by hand (issue #28 item 2).
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/emu/block_runner.hpp"
#include "kernels/emu/checker.hpp"
#include "kernels/emu/counters.hpp"
#include "kernels/emu/error.hpp"
#include "tests/checker_kernels.hpp"
#include "tests/cuda_case.hpp"

namespace {

namespace ck = kvsim::test::checker_kernels;

#define KVSIM_REQUIRE_CHECKER()                                                                          \
  if (!kvsim::emu::checker::enabled())                                                                   \
  GTEST_SKIP() << "the access checker is compiled out of this build (a sanitized build, or KVSIM_EMU_CHECKER=OFF)"

std::vector<std::string> source_lines(const std::string& rel) {
  std::ifstream in(std::string(KVSIM_SOURCE_DIR) + "/" + rel);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  return lines;
}

// "checker_kernels.cu:<n>" for the line of tests/checker_kernels.cu marked "// planted: <tag>".
std::string planted(const std::string& tag) {
  const auto lines = source_lines("tests/checker_kernels.cu");
  for (size_t i = 0; i < lines.size(); ++i)
    if (lines[i].find("// planted: " + tag) != std::string::npos)
      return "tests/checker_kernels.cu:" + std::to_string(i + 1);
  ADD_FAILURE() << "no line is marked '// planted: " << tag << "'";
  return "?";
}

// The checker's report of f, or "" when f did not throw one.
std::string report_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const kvsim::emu::Error& e) {
    return e.what();
  }
  return "";
}

void expect_report(const std::string& report, const std::string& kernel, const std::string& fault,
                   const std::vector<std::string>& lines) {
  ASSERT_FALSE(report.empty()) << "the checker reported nothing";
  EXPECT_NE(report.find("checker: kernel '" + kernel + "'"), std::string::npos) << report;
  EXPECT_NE(report.find(fault), std::string::npos) << report;
  for (const auto& l : lines) EXPECT_NE(report.find(l), std::string::npos) << l << "\n" << report;
}

TEST(EmuChecker, MissingBarrierIsASharedRace) {
  KVSIM_REQUIRE_CHECKER();
  const auto good = ck::neighbour_exchange(false);
  for (int t = 0; t < 64; ++t) EXPECT_EQ(good[t], (t + 33) % 64 * 3) << t;
  const std::string r = report_of([] { ck::neighbour_exchange(true); });
  expect_report(r, "neighbour_exchange_kernel", "shared-memory race on neighbour_exchange_kernel::slot",
                {planted("exchange-write"), planted("exchange-read"), "different warps"});
}

TEST(EmuChecker, WarpExchangeNeedsAWarpSynchronousPointNamingBothLanes) {
  KVSIM_REQUIRE_CHECKER();
  using ck::WarpOrder;
  for (const WarpOrder o : {WarpOrder::syncwarp, WarpOrder::shuffle}) {  // ordered: no report
    const auto good = ck::warp_exchange(o);
    for (int l = 0; l < 32; ++l) EXPECT_EQ(good[l], (l ^ 1) + 100) << l;
  }
  for (const WarpOrder o : {WarpOrder::none, WarpOrder::split_masks}) {
    const std::string r = report_of([o] { ck::warp_exchange(o); });
    expect_report(r, "warp_exchange_kernel", "shared-memory race",
                  {planted("warp-write"), planted("warp-read"), "no __syncthreads, __syncwarp or warp collective"});
  }
}

TEST(EmuChecker, UnsynchronizedSharedCounterIsARace) {
  KVSIM_REQUIRE_CHECKER();
  const auto good = ck::shared_counter(false);  // atomicAdd: atomics do not race with each other
  for (int v : good) EXPECT_EQ(v, 8);
  const std::string r = report_of([] { ck::shared_counter(true); });
  expect_report(r, "shared_counter_kernel", "shared-memory race on shared_counter_kernel::counter",
                {planted("counter-update")});
}

TEST(EmuChecker, GlobalReadPastTheAllocationIsOutOfBounds) {
  KVSIM_REQUIRE_CHECKER();
  const auto good = ck::shift_copy(false);
  for (int i = 0; i < 60; ++i) EXPECT_EQ(good[i], 1.f + float(i));
  const std::string r = report_of([] { ck::shift_copy(true); });
  expect_report(r, "shift_kernel", "out of bounds", {planted("shift-read"), "thread (59,0,0) reads 4 bytes"});
}

TEST(EmuChecker, SharedIndexPastItsArrayIsOutOfBounds) {
  KVSIM_REQUIRE_CHECKER();
  const auto good = ck::static_shared_overrun(false);
  for (int t = 0; t < 32; ++t) EXPECT_EQ(good[t], float(3 * t));
  // Where first[32..39] lands depends on the link's layout of thread-local storage: another array (which
  // the same instruction then reaches besides first) or none.
  expect_report(report_of([] { ck::static_shared_overrun(true); }), "static_overrun_kernel",
                "static shared memory out of bounds", {planted("static-overrun")});
  const auto dyn = ck::dynamic_shared_overrun(false);
  for (int t = 0; t < 32; ++t) EXPECT_EQ(dyn[t], float(t));
  expect_report(report_of([] { ck::dynamic_shared_overrun(true); }), "dynamic_overrun_kernel",
                "thread (31,0,0) reads 4 bytes at offset 128 of dynamic shared memory",
                {planted("dynamic-overrun"), "out of bounds (the launch has 128 bytes)"});
}

TEST(EmuChecker, ReadOfDeviceMemoryNothingWroteIsReported) {
  KVSIM_REQUIRE_CHECKER();
  EXPECT_EQ(ck::sum_partly_copied(false), 40.f * 41.f / 2.f);
  const std::string r = report_of([] { ck::sum_partly_copied(true); });
  expect_report(r, "sum_kernel", "bytes at offset 156 of a device allocation of 160 bytes",
                {planted("sum-read"), "that nothing has written since cudaMalloc"});
}

TEST(EmuChecker, HostPointerInsideAParamsStructIsReported) {
  KVSIM_REQUIRE_CHECKER();
  const auto good = ck::scale_through_params(false);
  for (int i = 0; i < 64; ++i) EXPECT_EQ(good[i], 2.f * (1.f + float(i)));
  const std::string r = report_of([] { ck::scale_through_params(true); });
  expect_report(r, "scale_kernel", "a host pointer dereferenced in a kernel", {planted("params-read")});
}

TEST(EmuChecker, InterBlockReadNeedsFenceAndAtomic) {
  KVSIM_REQUIRE_CHECKER();
  const float total = 128.f * 129.f / 2.f;
  EXPECT_EQ(ck::last_block_sum(0), total);  // __threadfence, then atomicInc: the sanctioned pattern
  expect_report(report_of([] { ck::last_block_sum(1); }), "last_block_sum_kernel", "with no __threadfence after its writes",
                {planted("partial-read"), "a word that block (0,0,0) of the same launch wrote"});
  expect_report(report_of([] { ck::last_block_sum(2); }), "last_block_sum_kernel",
                "before this block performed any atomic", {planted("partial-read")});
}

// Skipping a __syncthreads call site in every thread is deleting that line: the call has no effect but
// the barrier (it returns void and changes no state a kernel can see), and the skip applies to every
// execution of the site. The kernels are not recompiled, so g++ still reloads shared memory after the
// (now empty) call, where without the line it might keep a value in a register; either way the
// accesses on the two sides of the missing barrier still happen in the same barrier interval, which is
// what the checker judges.
struct BarrierSite {
  std::string file;
  unsigned line;
};
// One exception: a barrier right before a grid's last-block ticket (the comment above it says
// "[handoff barrier]", and the next line takes the ticket with an atomicAdd) orders every thread's
// global writes and fence before another block can see the ticket. The emulator runs blocks one after
// another, so no case can show it missing; the test checks that such a barrier is exactly that.
std::vector<BarrierSite> barrier_sites(const std::string& rel) {
  std::vector<BarrierSite> sites;
  const auto lines = source_lines(rel);
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string code = lines[i].substr(0, lines[i].find("//"));
    if (code.find("__syncthreads(") == std::string::npos) continue;
    const bool handoff = i >= 2 && (lines[i - 1].find("[handoff barrier]") != std::string::npos ||
                                    lines[i - 2].find("[handoff barrier]") != std::string::npos);
    if (handoff) {
      EXPECT_TRUE(i + 1 < lines.size() && lines[i + 1].find("atomicAdd(") != std::string::npos &&
                  lines[i + 1].find("ticket") != std::string::npos)
          << rel << ":" << i + 1 << ": a [handoff barrier] must be followed by the ticket's atomicAdd";
      continue;
    }
    sites.push_back({rel, unsigned(i + 1)});
  }
  return sites;
}

// Runs the case with the fake reporter: its expectation failures are collected instead of failing
// this test. Returns how the fault showed, or "" when it did not.
std::string run_catching(const kvsim::test::CudaCaseDef& c) {
  testing::TestPartResultArray failures;
  std::string caught;
  {
    testing::ScopedFakeTestPartResultReporter reporter(
        testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD, &failures);
    try {
      c.run();
    } catch (const kvsim::emu::Error& e) {
      const std::string what = e.what();
      caught = what.find("checker:") != std::string::npos ? "the checker" : "the emulator";
      caught += " (" + what.substr(0, what.find('\n', what.find('\n') + 1)) + ")";
    } catch (const std::exception& e) {
      caught = std::string("an exception: ") + e.what();
    }
  }
  if (caught.empty() && failures.size() > 0) caught = "a wrong result";
  return caught.empty() ? "" : caught + " in case " + c.name;
}

TEST(EmuChecker, EveryBarrierOfTopkAndPagedDecodeIsNeeded) {
  KVSIM_REQUIRE_CHECKER();
  struct File {
    const char* path;
    const char* cases;  // the cases that exercise it run first
  };
  const auto& cases = kvsim::test::optimized_emu_cases();
  size_t checked = 0;
  for (const File f : {File{"kernels/optimized/topk.cu", "Topk"}, File{"kernels/optimized/paged_decode.cu", "Page"},
                       File{"kernels/optimized/block_select.cuh", "Topk"},
                       File{"kernels/optimized/chess_select.cu", "Chess"},
                       File{"kernels/optimized/chess_levels.cu", "Chess"},
                       File{"kernels/optimized/centroid_recall.cu", "Centroid"},
                       File{"kernels/optimized/sekv.cu", "SekvZoom"},
                       File{"kernels/optimized/reconstruct.cu", "SekvReconstruct"},
                       File{"kernels/optimized/route_gates.cu", "RouteGates"},
                       File{"kernels/optimized/group_scores.cu", "GroupScores"}}) {
    const auto sites = barrier_sites(f.path);
    EXPECT_FALSE(sites.empty()) << f.path;
    std::vector<const kvsim::test::CudaCaseDef*> order;
    for (const auto& c : cases)
      if (std::string(c.name).find(f.cases) != std::string::npos) order.push_back(&c);
    for (const auto& c : cases)
      if (std::string(c.name).find(f.cases) == std::string::npos) order.push_back(&c);
    for (const BarrierSite& s : sites) {
      kvsim::emu::skip_barrier_at(s.file, s.line);
      std::string caught;
      for (const auto* c : order)
        if (!(caught = run_catching(*c)).empty()) break;
      kvsim::emu::skip_barrier_at("", 0);
      EXPECT_FALSE(caught.empty()) << "deleting the __syncthreads at " << s.file << ":" << s.line
                                   << " goes unnoticed by every optimized kernel case";
      if (!caught.empty()) std::cout << "  " << s.file << ":" << s.line << " deleted: caught by " << caught << "\n";
      ++checked;
    }
  }
  std::cout << "  " << checked << " barrier deletions tried\n";
}

// ---- traffic (kernels/emu/counters.hpp) ----

kvsim::emu::LaunchCounts counted(void (*run)()) {
  kvsim::emu::CountScope scope;
  run();
  EXPECT_EQ(scope.counts().launches.size(), 1u);
  return scope.counts().launches.empty() ? kvsim::emu::LaunchCounts{} : scope.counts().launches[0];
}

TEST(EmuTraffic, CoalescedCopyUsesEveryByteOfItsSectors) {
  KVSIM_REQUIRE_CHECKER();
  const auto c = counted(ck::coalesced_copy);
  EXPECT_EQ(c.kernel, "copy_kernel");
  EXPECT_EQ(c.load_instructions, 2u);  // one per warp
  EXPECT_EQ(c.load_sectors, 8u);       // 2 warps x 128 bytes
  EXPECT_EQ(c.load_useful_bytes, 256u);
  EXPECT_EQ(c.store_instructions, 2u);
  EXPECT_EQ(c.store_sectors, 8u);
  EXPECT_EQ(c.store_useful_bytes, 256u);
  EXPECT_EQ(c.atomic_instructions, 0u);
  EXPECT_DOUBLE_EQ(c.efficiency(), 1.0);
}

TEST(EmuTraffic, Stride2ReadFetchesTwiceWhatItUses) {
  KVSIM_REQUIRE_CHECKER();
  const auto c = counted(ck::stride2_read);
  EXPECT_EQ(c.load_instructions, 2u);
  EXPECT_EQ(c.load_sectors, 16u);  // each warp spans 256 bytes
  EXPECT_EQ(c.load_useful_bytes, 256u);
  EXPECT_DOUBLE_EQ(double(c.load_useful_bytes) / double(32 * c.load_sectors), 0.5);
  EXPECT_EQ(c.store_sectors, 8u);
}

TEST(EmuTraffic, BroadcastReadIsOneSectorAndFourBytesPerWarp) {
  KVSIM_REQUIRE_CHECKER();
  const auto c = counted(ck::broadcast_read);
  EXPECT_EQ(c.load_instructions, 2u);
  EXPECT_EQ(c.load_sectors, 2u);
  EXPECT_EQ(c.load_useful_bytes, 8u);
  const auto a = counted(ck::one_counter_atomics);
  EXPECT_EQ(a.atomic_instructions, 2u);
  EXPECT_EQ(a.atomic_sectors, 2u);
  EXPECT_EQ(a.atomic_useful_bytes, 8u);
  EXPECT_EQ(a.load_instructions + a.store_instructions, 0u);
}

TEST(EmuTraffic, ChainCountsTheLongestThreadPerBarrierInterval) {
  KVSIM_REQUIRE_CHECKER();
  const auto c = counted(ck::chain_of_loads);
  EXPECT_EQ(c.chain_global, 7u);  // 4 loads by every thread, then 3 more by thread 0 after the barrier
  EXPECT_EQ(c.chain_shared, 1u);  // the neighbour's slot; the stores before the barrier are not steps
  EXPECT_EQ(c.barriers, 1u);
  EXPECT_EQ(c.static_shared_bytes, 256u);  // slot[64]
  // 2 blocks x 256 distinct floats read: 64 sectors, all first touches.
  EXPECT_EQ(c.unique_read_sectors, 64u);
}

}  // namespace
