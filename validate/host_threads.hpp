// What a host phase pays for running as separate calls on the host's cores, measured on this machine
// for kvsim's own (native) host kernels: the `host_threads:` block of a host calibration
// (model/calibration.hpp, HostThreads), which the planner charges to host phases that declare their
// calls and independent pieces (Phase::lanes, whose launches are then host calls; model/roofline.hpp, host_limits).
//
//   call_s     one call of the optimized host attention kernel over a single token (one KV head's GQA
//              group of 4 query rows, d = 128): the part of a per-head call that does not grow with
//              its tokens (argument set-up, dispatch, the first cache misses), median of many calls
//   region_s   one parallel region of kvsim's parallel_for (core/parallel.hpp) over every core with an
//              empty body: the fork and the join a phase split over threads pays once per layer, median
//   core_dram  STREAM triad on one thread while the others idle: the DRAM bandwidth one core reaches
//              (a per-head piece runs on one core), as measure_host_ceilings times it
#pragma once
#include "model/calibration.hpp"
#include "validate/validate.hpp"

namespace kvsim::validate {

HostThreads measure_host_threads(const Timer& timer, const Options& o);

// The calibration file's block for it, with what each number is and how it was measured.
std::string host_threads_yaml(const HostThreads& h);

}  // namespace kvsim::validate
