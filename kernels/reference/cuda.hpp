// The simple CUDA versions of the main reference kernels (kernels/reference/*.cu) and their launchers
// (declared in cuda_launchers.hpp), in two builds of the same sources with the same signatures:
//   kvsim::ref::cuda      nvcc, for a real GPU; defined only where KVSIM_HAVE_CUDA is (nvcc was found);
//   kvsim::ref::cuda_emu  the C++ compiler through the CUDA emulator (kernels/emu, kernels/README.md),
//                         running on the CPU; defined in every build.
// Both are declared everywhere; calling kvsim::ref::cuda without KVSIM_HAVE_CUDA fails to link.
#pragma once

#define KVSIM_CUDA_LAUNCHERS_NS cuda
#include "kernels/reference/cuda_launchers.hpp"
#undef KVSIM_CUDA_LAUNCHERS_NS

#define KVSIM_CUDA_LAUNCHERS_NS cuda_emu
#include "kernels/reference/cuda_launchers.hpp"
#undef KVSIM_CUDA_LAUNCHERS_NS
