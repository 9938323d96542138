// Under the emulator this header stands in for the CUDA toolkit's (kernels/emu/include is first on the
// include path of the emulated kernels only): it is the whole emulator, as nvcc makes the whole runtime
// visible to a .cu file.
#pragma once
#include "kernels/emu/cuda.hpp"
