// `kvsim replay --device cuda`: each policy's selection and attention rerun on a kernel backend
// (kernels/backend/backend.hpp: the optimized CUDA kernels of kernels/optimized/, on a GPU or emulated on
// the CPU) next to the host replay, and how far the two agree. The host replay stays the one that produces the quality metrics, so those
// are the same whatever the device; this is the check that the CUDA kernels reproduce it.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/backend/backend.hpp"
#include "traces/select/selector.hpp"

namespace kvsim::replay {

// Which steps of one policy ran where on the device backend.
struct DeviceStep {
  std::string step;   // kernels::step_name
  std::string where;  // "device" or "host"
  int64_t calls = 0;
  std::string kernels;  // kernels::Backend::kernels: the kernel functions that ran it, in launch order
};

struct DeviceCheck {
  std::string backend;             // kernels::Backend::name()
  bool timing_meaningful = false;  // false on the emulator: no timing is reported
  // Whether the policy's selector routes its kernels through the backend (policies/kernel_selector.hpp).
  // When false its selection ran on the host reference kernels and only its attention ran on the backend.
  bool selection_on_backend = false;
  int64_t selections = 0;          // (decode row, layer, KV head) selections compared
  int64_t mismatched = 0;          // of those (and of id_lists), how many attend a different index set than the host's
  int64_t id_lists = 0;            // full attention's id lists 0..p written on the device and checked
  std::string first_mismatch;      // where the first one was, empty when none
  int64_t outputs = 0;             // attention outputs compared ((row, layer, query head); 0 without values)
  double max_rel_error = 0;        // max ||o_device - o_host|| / ||o_host|| over them
  std::vector<DeviceStep> steps;   // selection and attention steps in the order of kernels::Step
  bool identical() const { return mismatched == 0; }
};

// The same index sets: both `all`, or the same tokens and extra_tokens (extra K/V rows are values, not
// indices: their effect shows in the output error).
bool same_selection(const HeadSelection& a, const HeadSelection& b);
// ||a - b|| / ||b|| over d floats (||a - b|| when b is zero).
double relative_error(const float* a, const float* b, int d);
// The step log of a backend as DeviceSteps.
std::vector<DeviceStep> device_steps(const kernels::Backend& b);

// Relative error the CUDA kernels' attention may show against the host's: float32 with a different
// summation order (tree reductions across a block instead of a sequential loop).
inline constexpr double kDeviceOutputTolerance = 1e-4;

}  // namespace kvsim::replay
