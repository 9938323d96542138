// snapkv: the CUDA kernels that implement its GPU phases (`kvsim validate --device emu`,
// policies/phase_kernels.hpp): decode attention over the tokens it keeps, as paged decode over dense
// pages of 16 (FlashInfer's default page).
#include "policies/phase_kernels.hpp"
#include "policies/snapkv/policy.hpp"

namespace kvsim::policies::snapkv {

PhaseKernelLinks phase_kernels() { return {attention_link("attention", nullptr, false)}; }

}  // namespace kvsim::policies::snapkv
