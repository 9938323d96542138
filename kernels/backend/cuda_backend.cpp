// make_cuda_backend: the optimized CUDA kernels (kernels/optimized/) on a GPU where nvcc built them and a device is present, else the same
// sources on the CPU through the emulator (kernels/README.md). Both backends are cuda_backend.inc.
#include <algorithm>
#include <stdexcept>
#include <string>
#include <map>
#include <mutex>

#include "kernels/backend/backend.hpp"
#include "kernels/cuda_device.hpp"
#include "kernels/optimized/cuda.hpp"
#include "kernels/reference/cuda.hpp"
#include "kernels/reference/lowrank.hpp"

#define KVSIM_BACKEND_LAUNCHERS cuda_emu
#include "kernels/backend/cuda_backend.inc"
#undef KVSIM_BACKEND_LAUNCHERS

#if defined(KVSIM_HAVE_CUDA)
#define KVSIM_BACKEND_LAUNCHERS cuda
#include "kernels/backend/cuda_backend.inc"
#undef KVSIM_BACKEND_LAUNCHERS
#endif

namespace kvsim::kernels {

std::unique_ptr<Backend> make_cuda_backend(std::string* why) {
  std::string reason;
  const auto gpus = kvsim::cuda::devices(&reason);
#if defined(KVSIM_HAVE_CUDA)
  if (!gpus.empty()) return cuda::make_backend("cuda (" + gpus.front().name + ")", true);
#endif
  if (why) *why = reason.empty() ? "no CUDA device" : reason;
  return cuda_emu::make_backend("cuda (emulated on the CPU)", false);
}

}  // namespace kvsim::kernels
