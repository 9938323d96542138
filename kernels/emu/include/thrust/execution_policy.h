// Under the emulator: the subset of Thrust the kernels' launchers call, on host memory, for the one
// execution policy they use (thrust::device). Each algorithm lives in the header Thrust puts it in;
// an algorithm, overload or policy not defined in kernels/emu/include/thrust is a compile error.
// Results are the same as Thrust's wherever Thrust's are defined: sorts are given total orders.
#pragma once

namespace thrust {
struct device_execution_policy {};
inline constexpr device_execution_policy device{};
}  // namespace thrust
