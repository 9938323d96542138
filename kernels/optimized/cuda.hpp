// The optimized CUDA kernels (kernels/optimized/*.cu) and their launchers (cuda_launchers.hpp), in two
// builds of the same sources, exactly as kernels/reference/cuda.hpp has them:
//   kvsim::opt::cuda      nvcc, for a real GPU; defined only where KVSIM_HAVE_CUDA is;
//   kvsim::opt::cuda_emu  the C++ compiler through the CUDA emulator (kernels/emu), in every build.
#pragma once

// First: its launchers (DeviceBuffer, LevelCounts) are used by these, and it sets and clears the same
// KVSIM_CUDA_LAUNCHERS_NS macro, so it must not be included from inside the blocks below.
#include "kernels/reference/cuda.hpp"

#define KVSIM_CUDA_LAUNCHERS_NS cuda
#include "kernels/optimized/cuda_launchers.hpp"
#undef KVSIM_CUDA_LAUNCHERS_NS

#define KVSIM_CUDA_LAUNCHERS_NS cuda_emu
#include "kernels/optimized/cuda_launchers.hpp"
#undef KVSIM_CUDA_LAUNCHERS_NS
