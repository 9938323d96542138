// The GPU kit: what `make gpu-validate` runs on the day a GPU is at hand (`kvsim validate --device cuda
// --kit`). It times every CUDA case on the GPU, writes scenarios/calibration/<gpu>-measured.yaml with
// curves under the model's phase names (Case::model_phases, the keys `kvsim plan` reads), and a report
// that puts each measured curve beside the published-kernel calibration of the same GPU
// (<gpu>-published.yaml, `kvsim calibrate published`). The whole path runs in the tests over the emulated
// launchers with a fake clock (fake_timer), so a run on a GPU needs no code change (the first, on an H200:
// docs/validation/gpu-kit.md, "First run").
#pragma once
#include <string>
#include <vector>

#include "kernels/cuda_device.hpp"
#include "model/hardware.hpp"
#include "validate/validate.hpp"

namespace kvsim::validate {

// The library GPU a CUDA device is: the one whose SM count equals the device's and whose memory is
// within 4% of what the device reports (drivers report slightly less than the datasheet's GiB). Throws
// InputError when none or several match (e.g. A100-80G and A800 share both), naming the candidates and
// asking for --hardware.
const GpuSpec& match_library_gpu(const cuda::DeviceInfo& device, const std::vector<GpuSpec>& library);
// The same against every GPU of the data library (scenarios/hardware/), loaded here.
GpuSpec library_gpu_of(const cuda::DeviceInfo& device);

// The ceilings a GPU's kernels are fractions of: CUDA-core fp32, HBM and pinned host-to-device
// bandwidth from its spec; `ran_on` names the device the kernels ran on.
Ceilings gpu_ceilings(const GpuSpec& gpu, const std::string& ran_on);

// A clock for the plumbing tests: each instance "takes" its roofline time on `ce` divided by
// efficiency(instance), so every fitted efficiency is known in advance. With run_kernels every call
// also runs the instance once, so the kernels execute (under the emulator) as they would be timed.
Timer fake_timer(const Ceilings& ce, std::function<double(const Instance&)> efficiency, bool run_kernels);

// The kit's report (Markdown): the ceilings and the command, then per measured curve the points with the
// published calibration's efficiency for the same phase at the same x (its named curve, else its kind's
// curve, else its constant), and the ratio measured / published.
// `published` may be null (no published calibration for this GPU).
std::string kit_report(const std::vector<Case>& cases, const Result& measured, const Calibration* published,
                       const std::string& published_name);

// Runs the cases and writes the kit's two files atomically: `calibration_path` and `report_path`.
// `published` may be null (no published calibration for this GPU): the report says so.
Result run_kit(const std::vector<Case>& cases, const Ceilings& ce, const Timer& timer, const Options& o,
               const Calibration& uncalibrated, const Calibration* published, const std::string& published_name,
               const std::string& calibration_path, const std::string& report_path);

}  // namespace kvsim::validate
