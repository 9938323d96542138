// Included by the launchers for Thrust's device pointers; they pass raw pointers with thrust::device,
// so nothing is needed here. Using thrust::device_ptr itself is a compile error under the emulator.
#pragma once
#include "thrust/execution_policy.h"
