// The CUDA emulator: everything a .cu file sees under nvcc that the kernels use, for a C++ compiler.
// kvsim compiles every kernels/**/*.cu a second time through this header (CMakeLists.txt, the
// kvsim_kernels_emu library), so the same kernel code runs on a machine without a GPU; the approach and
// its limits are in kernels/README.md. Include it before anything that tests KVSIM_CUDA_EMU.
#pragma once
#ifndef KVSIM_CUDA_EMU
#define KVSIM_CUDA_EMU 1
#endif
#include <cmath>
#include <cstdint>

#include "kernels/emu/atomics.hpp"
#include "kernels/emu/barrier.hpp"
#include "kernels/emu/intrinsics.hpp"
#include "kernels/emu/launch.hpp"
#include "kernels/emu/qualifiers.hpp"
#include "kernels/emu/runtime.hpp"
#include "kernels/emu/thread_context.hpp"
#include "kernels/emu/vector_types.hpp"
#include "kernels/emu/warp.hpp"
