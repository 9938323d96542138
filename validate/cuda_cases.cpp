// The CUDA validation cases, in two builds of one text (the way kernels/backend/cuda_backend.cpp builds
// its backend): kvsim::validate::cuda over the nvcc launchers where nvcc built them (a real GPU, timed
// with CUDA events), and kvsim::validate::cuda_emu over the emulator's launchers in every build — where
// the kernels run on the CPU, so only their plumbing and their traffic mean anything (a fake clock in
// the tests, `kvsim validate --device emu` for bytes and launches).
#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <random>
#include <stdexcept>

#include "kernels/optimized/cuda.hpp"
#include "kernels/optimized/run_planner.hpp"
#include "kernels/reference/cuda.hpp"
#include "validate/validate.hpp"

#define KVSIM_VALIDATE_NS cuda_emu
#include "validate/cuda_inputs.inc"
#include "validate/cuda_optimized_cases.inc"
#include "validate/cuda_reference_cases.inc"
#undef KVSIM_VALIDATE_NS

#if defined(KVSIM_HAVE_CUDA)
#define KVSIM_VALIDATE_NS cuda
#include "validate/cuda_inputs.inc"
#include "validate/cuda_optimized_cases.inc"
#include "validate/cuda_reference_cases.inc"
#undef KVSIM_VALIDATE_NS
#endif

namespace kvsim::validate {

#if defined(KVSIM_HAVE_CUDA)
std::vector<Case> cuda_cases() { return cuda::cases(); }
std::vector<Case> cuda_optimized_cases() { return cuda::optimized_cases(); }
Timer cuda_timer() { return cuda::timer(); }
#else
std::vector<Case> cuda_cases() { return {}; }
std::vector<Case> cuda_optimized_cases() { return {}; }
Timer cuda_timer() {
  return [](const std::vector<Instance>&, int, int) -> std::vector<double> {
    throw std::runtime_error("kvsim was built without CUDA");
  };
}
#endif

std::vector<Case> emulated_cuda_cases() { return cuda_emu::cases(); }

}  // namespace kvsim::validate
